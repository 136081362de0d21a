import { Counter, Histogram } from 'prom-client';
import { registry } from './metrics';

/** How one webhook attempt went, a small fixed set (never the endpoint or merchant). */
export type WebhookAttemptOutcome =
  'delivered' | 'http_4xx' | 'http_5xx' | 'timeout' | 'refused' | 'redirect' | 'network';

const attempts = new Counter({
  name: 'svc_webhook_attempts_total',
  help: 'Webhook attempts recorded, by outcome.',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

const lag = new Histogram({
  name: 'svc_webhook_delivery_lag_seconds',
  help: 'From the event commit to its delivery (the 2xx attempt recorded), retries included.',
  buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400, 86400],
  registers: [registry],
});

// Every outcome from 0, so that a rate over the first failure is not lost to a series that did not exist yet.
for (const outcome of ['delivered', 'http_4xx', 'http_5xx', 'timeout', 'refused', 'redirect', 'network'] as const) {
  attempts.inc({ outcome }, 0);
}

/**
 * The dispatcher's wakes of endpoint workflows: `sent` (a signal reached Temporal), `failed` (it did
 * not: the overdue sweep tries again), `skipped` (the endpoint's activity watched its queue).
 */
export const webhookWakes = new Counter({
  name: 'svc_webhook_wakes_total',
  help: 'Wake signals to endpoint delivery workflows, by outcome sent|failed|skipped.',
  labelNames: ['outcome'] as const,
  registers: [registry],
});
for (const outcome of ['sent', 'failed', 'skipped'] as const) webhookWakes.inc({ outcome }, 0);

/** Endpoints disabled after failing for three days. */
export const webhookEndpointsDisabled = new Counter({
  name: 'svc_webhook_endpoints_disabled_total',
  help: 'Webhook endpoints disabled automatically after failing deliveries for three days.',
  registers: [registry],
});

/** Merchants told by e-mail that an endpoint has failed for 24 hours. */
export const webhookEndpointsFailingNotified = new Counter({
  name: 'svc_webhook_endpoints_failing_notified_total',
  help: 'E-mails queued telling a merchant that an endpoint has failed for 24 hours.',
  registers: [registry],
});

/** The delivery row errors that mean the URL check refused the target before anything was sent. */
const REFUSED = new Set([
  'https_required',
  'credentials',
  'localhost',
  'local',
  'private_target',
  'internal',
  'unresolvable',
]);

/** The outcome label of a recorded attempt, from its status code and error token (src/webhooks/send.ts). */
export function webhookAttemptOutcome(statusCode: number | null, error: string | null): WebhookAttemptOutcome {
  if (error === null) return 'delivered';
  if (statusCode !== null && statusCode >= 300 && statusCode < 400) return 'redirect';
  if (statusCode !== null && statusCode >= 400 && statusCode < 500) return 'http_4xx';
  if (statusCode !== null) return 'http_5xx';
  if (error === 'timeout') return 'timeout';
  if (REFUSED.has(error)) return 'refused';
  return 'network';
}

/** Counts attempts newly recorded (a row recorded before, by a retried activity, is not counted again). */
export function countWebhookAttempts(
  rows: ReadonlyArray<{ status_code: number | null; error: string | null; delivered_at: Date | null }>,
  eventCommittedAt: (index: number) => Date | undefined,
): void {
  rows.forEach((row, i) => {
    if (row.delivered_at === null) return; // nothing was tried (endpoint gone or disabled)
    attempts.inc({ outcome: webhookAttemptOutcome(row.status_code, row.error) });
    const committed = eventCommittedAt(i);
    if (row.error === null && committed) {
      lag.observe(Math.max(0, (new Date(row.delivered_at).getTime() - new Date(committed).getTime()) / 1000));
    }
  });
}
