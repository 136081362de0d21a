/** Route and wake: which endpoints an event goes to, and the wake signals that tell their workflows rows are queued. */
import type { Client } from '@temporalio/client';
import type { Db } from '../db/knex';
import type { KeyMode } from '../keys/keys';
import { mapLimited } from '../lib/concurrency';
import { log } from '../lib/log';
import { webhookWakes } from '../telemetry/webhooks';
import { WakeTarget, wakeEndpoint } from '../temporal/delivery';
import { subscribes } from './endpoint-row';

/** The event columns fan-out reads. */
export interface DispatchableEvent {
  id: string;
  merchant_id: string;
  mode: KeyMode;
  type: string;
  /** Set only on a `test` route event: it goes to that endpoint alone. */
  target_endpoint_id: string | null;
  /** The trace that recorded the event (its fan-out is a span of it). */
  traceparent?: string | null;
}

interface EndpointMatch {
  id: string;
  merchant_id: string;
  mode: KeyMode;
  events: string[];
  status: string;
}

/**
 * For each event, the ids of the endpoints it goes to: every enabled endpoint of its merchant and
 * mode subscribed to its type (or `*`); a test event goes to its target only, whatever its status
 * (a disabled one records the attempt as `endpoint_disabled`) unless `enabledOnly`.
 */
export async function endpointsFor(
  db: Db,
  events: readonly DispatchableEvent[],
  opts: { enabledOnly: boolean },
): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  if (events.length === 0) return out;
  const tenants = [...new Set(events.map((e) => `${e.merchant_id}\u0000${e.mode}`))].map((t) => t.split('\u0000'));
  const rows: EndpointMatch[] = await db('webhook_endpoints')
    .whereIn(['merchant_id', 'mode'], tenants)
    .select('id', 'merchant_id', 'mode', 'events', 'status');
  for (const event of events) {
    const mine = rows.filter((r) => r.merchant_id === event.merchant_id && r.mode === event.mode);
    const targets = event.target_endpoint_id
      ? mine.filter((r) => r.id === event.target_endpoint_id && (!opts.enabledOnly || r.status === 'enabled'))
      : mine.filter((r) => r.status === 'enabled' && subscribes(r.events, event.type));
    out.set(
      event.id,
      targets.map((r) => r.id),
    );
  }
  return out;
}

/** The endpoints to wake, with their merchant's name (for the workflow's summary). */
export async function wakeTargets(db: Db, endpointIds: readonly string[]): Promise<WakeTarget[]> {
  if (endpointIds.length === 0) return [];
  return db('webhook_endpoints as e')
    .join('merchants as m', 'm.id', 'e.merchant_id')
    .whereIn('e.id', endpointIds)
    .select(
      'e.id',
      'e.merchant_id as merchantId',
      'e.mode',
      'e.url',
      'm.display_name as merchantName',
      'e.max_in_flight as maxInFlight',
    );
}

/**
 * Wakes each endpoint's workflow after the rows were committed; a failed signal is logged and
 * left to the dispatcher's sweep, which wakes endpoints whose rows stay overdue.
 */
export async function wakeAll(
  temporal: Client,
  taskQueue: string,
  targets: ReadonlyArray<{ target: WakeTarget; count?: number }>,
  concurrency: number,
): Promise<void> {
  await mapLimited(targets, concurrency, ({ target, count }) =>
    wakeEndpoint(temporal, taskQueue, target, count).catch((err) =>
      log.warn('could not wake a delivery workflow; the dispatcher sweep retries', {
        endpoint_id: target.id,
        error: err,
      }),
    ),
  );
}

/** Wake signals sent in the background (`startWaker`). */
export interface Waker {
  /** Asks for a wake of the endpoint's workflow (`count` rows queued, when known); returns at once. */
  wake(target: WakeTarget, count?: number): void;
  /** Resolves once no wake is in flight or waiting. */
  idle(): Promise<void>;
}

/**
 * Sends wake signals in the background so that the dispatcher's passes never wait on Temporal:
 * at most `concurrency` in flight, and one per endpoint every `spacingMs`; the wakes asked for an
 * endpoint meanwhile are summed into one more, sent after that. (A busy endpoint's delivery
 * activities take new rows as they are announced; its wakes only make sure one is running, and
 * fewer of them keep its workflow's history short.) A failed wake is logged and
 * left to the dispatcher's sweep, which wakes endpoints whose rows stay overdue.
 */
export function startWaker(temporal: Client, taskQueue: string, concurrency: number, spacingMs = 200): Waker {
  /** Endpoint id → the wake to send next, in the order they were asked for. */
  const waiting = new Map<string, { target: WakeTarget; count?: number }>();
  const inFlight = new Set<string>();
  let idle: Array<() => void> = [];

  const pump = () => {
    for (const [id, next] of waiting) {
      if (inFlight.size >= concurrency) break;
      if (inFlight.has(id)) continue;
      waiting.delete(id);
      inFlight.add(id);
      wakeEndpoint(temporal, taskQueue, next.target, next.count)
        .then(
          () => webhookWakes.inc({ outcome: 'sent' }),
          (err: unknown) => {
            webhookWakes.inc({ outcome: 'failed' });
            log.warn('could not wake a delivery workflow; the dispatcher sweep retries', {
              endpoint_id: id,
              error: err,
            });
          },
        )
        .finally(() =>
          setTimeout(() => {
            inFlight.delete(id);
            pump();
          }, spacingMs),
        );
    }
    if (inFlight.size === 0 && waiting.size === 0) {
      idle.forEach((resolve) => resolve());
      idle = [];
    }
  };

  return {
    wake(target, count) {
      const before = waiting.get(target.id);
      const sum = before === undefined ? count : (before.count ?? 1) + (count ?? 1);
      waiting.set(target.id, { target, count: sum });
      pump();
    },
    idle: () =>
      inFlight.size === 0 && waiting.size === 0 ? Promise.resolve() : new Promise((resolve) => idle.push(resolve)),
  };
}
