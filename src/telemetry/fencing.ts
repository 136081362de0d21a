import { Counter } from 'prom-client';
import { log } from '../lib/log';
import { registry } from './metrics';

/**
 * Where a write made under a claim or lease can be fenced (docs/architecture.md "Fencing"), a
 * fixed set: the webhook queue's recording (its attempts, the endpoint's failure clock with them,
 * the row's move), the endpoint's 24-hour e-mail and 3-day disable, the outbox relay's send and
 * its marks, the handoff relay's delete and error mark, and an activity's write after its own
 * start-to-close deadline.
 */
export const FENCE_SITES = ['webhook_queue', 'endpoint_failure_clock', 'outbox', 'handoff_relay', 'activity'] as const;
export type FenceSite = (typeof FENCE_SITES)[number];

const claimsFenced = new Counter({
  name: 'svc_claims_fenced_total',
  help: 'Writes refused because the claim, lease or activity deadline they were made under had lapsed or been taken over, by site.',
  labelNames: ['site'] as const,
  registers: [registry],
});

// Every site from 0 (the ClaimsLapsed alert takes an increase): the first fenced write shows.
for (const site of FENCE_SITES) claimsFenced.inc({ site }, 0);

/**
 * Counts `count` writes refused at `site` (a process resumed after its claim lapsed, or another
 * claimant took the work over) and says so in one warn line with the ids it names (never an
 * address, a body or a secret). Nothing when `count` is 0.
 */
export function fenced(site: FenceSite, count: number, ids: Record<string, unknown>): void {
  if (count <= 0) return;
  claimsFenced.inc({ site }, count);
  log.warn('stale claim fenced: the write was not made', { site, fenced: count, ...ids });
}
