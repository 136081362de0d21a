import { mapLimited } from '../lib/concurrency';
import type { Client } from '@temporalio/client';
import { EVENTS_CHANNEL } from '../checkout/events';
import type { Db } from '../db/knex';
import { type NotifiedLoop, startNotifiedLoop } from '../db/notified-loop';
import { DispatchableEvent, endpointsFor, signalDelivery } from './dispatch';

export interface DispatcherDeps {
  db: Db;
  /** For the dedicated LISTEN connection (outside the pool). */
  databaseUrl: string;
  temporal: Client;
  taskQueue: string;
  /** How often undispatched events are swept up without a notification (a missed one, a crash). */
  sweepEveryMs?: number;
  /** Events per transaction. */
  batchSize?: number;
  /** Concurrent signals to Temporal (one per endpoint per batch). */
  concurrency?: number;
  /** Only these merchants' events (test files share one database, each with its own Temporal server). */
  merchantIds?: ReadonlySet<string>;
}

/** `drain()` dispatches every undispatched event now; `stop()` waits for the running pass. */
export type Dispatcher = Omit<NotifiedLoop, 'ready'>;

/**
 * Webhook fan-out after commit, run by the worker process: LISTENs on the events channel (Postgres
 * announces an event only when its transaction commits) and sweeps every few seconds. Each pass
 * locks a batch of undispatched events (FOR UPDATE SKIP LOCKED, so several dispatchers share the
 * work), hands them to their endpoints' delivery workflows (one signal per endpoint and batch),
 * and marks them dispatched in the same
 * transaction. A dispatcher dying midway leaves its events undispatched for the next pass, and the
 * workflows ignore the signals it repeats: no committed event is lost.
 */
export function startDispatcher(deps: DispatcherDeps): Dispatcher {
  const sweepEveryMs = deps.sweepEveryMs ?? 5000;
  const batchSize = deps.batchSize ?? 200;
  const concurrency = deps.concurrency ?? 16;

  /** One batch in one transaction; returns how many events it dispatched. */
  async function dispatchBatch(): Promise<number> {
    return deps.db.transaction(async (trx) => {
      const query = trx('events')
        .whereNull('dispatched_at')
        .orderBy('created_at')
        .limit(batchSize)
        .forUpdate()
        .skipLocked()
        .select('id', 'merchant_id', 'mode', 'type', 'target_endpoint_id');
      if (deps.merchantIds) query.whereIn('merchant_id', [...deps.merchantIds]);
      const events: DispatchableEvent[] = await query;
      if (events.length === 0) return 0;
      const targets = await endpointsFor(trx, events, { enabledOnly: false });
      // One signal per endpoint for the whole batch, events in commit order.
      const perEndpoint = new Map<string, string[]>();
      for (const e of events) {
        for (const endpointId of targets.get(e.id) ?? []) {
          const ids = perEndpoint.get(endpointId) ?? [];
          if (ids.length === 0) perEndpoint.set(endpointId, ids);
          ids.push(e.id);
        }
      }
      await mapLimited([...perEndpoint], concurrency, ([endpointId, eventIds]) =>
        signalDelivery(deps.temporal, deps.taskQueue, endpointId, { eventIds, generation: 0 }),
      );
      await trx('events')
        .whereIn(
          'id',
          events.map((e) => e.id),
        )
        .update({ dispatched_at: trx.fn.now() });
      return events.length;
    });
  }

  return startNotifiedLoop({
    connection: deps.databaseUrl,
    channel: EVENTS_CHANNEL,
    name: 'webhook dispatcher',
    everyMs: sweepEveryMs,
    batchSize,
    batch: dispatchBatch,
    enabled: deps.merchantIds?.size !== 0,
  });
}
