import type { ClientConfig } from 'pg';
/** Fan-out: the worker's dispatcher turns committed events into queue rows, one per endpoint, then wakes their workflows. */
import type { Client } from '@temporalio/client';
import { EVENTS_CHANNEL } from '../checkout/events';
import type { Db } from '../db/knex';
import { type NotifiedLoop, startNotifiedLoop } from '../db/notified-loop';
import { log } from '../lib/log';
import { DispatchableEvent, endpointsFor, startWaker, wakeTargets } from './route-and-wake';
import { enqueue, overdueEndpoints, QueueEntry } from './queue';
import { announceQueued } from './queue-announce';
import { recordInStoredTrace } from '../telemetry/propagation';
import { webhookWakes } from '../telemetry/webhooks';
import { watchedEndpoints } from './watches';

export interface DispatcherDeps {
  db: Db;
  /** For the dedicated LISTEN connection (outside the pool). */
  databaseUrl: string;
  temporal: Client;
  taskQueue: string;
  /** How often undispatched events and overdue queue rows are swept up without a notification. */
  sweepEveryMs?: number;
  /** Events per transaction. */
  batchSize?: number;
  /** Wake signals to Temporal in flight at once (at most one per endpoint). */
  concurrency?: number;
  /** Only these merchants' events (test files share one database, each with its own Temporal server). */
  merchantIds?: ReadonlySet<string>;
}

/** `drain()` dispatches every undispatched event now; `stop()` waits for the running pass. */
export type Dispatcher = Omit<NotifiedLoop, 'ready'>;

/** Queue rows overdue by this much get their endpoint's workflow woken again (a lost wake). */
const OVERDUE_MS = 30_000;

/**
 * Webhook fan-out after commit, run by the worker process: LISTENs on the events channel (Postgres
 * announces an event only when its transaction commits) and sweeps every few seconds. Each batch
 * is one short transaction that locks undispatched events (FOR UPDATE SKIP LOCKED, so several
 * dispatchers share the work), queues one row per matching endpoint in `webhook_queue` and marks
 * the events dispatched; after the commit, and never inside it, each endpoint's workflow gets a
 * wake signal unless its delivery activity watches its queue (src/webhooks/watches.ts: it hears
 * the rows announced at the commit), sent in the background (`startWaker`) so that no pass waits on Temporal: a slow
 * signal delays that endpoint's wake only, never the next events' fan-out. A dispatcher dying after the commit loses no delivery: the rows are in Postgres,
 * and the sweep wakes any endpoint whose rows stay overdue.
 */
export function startDispatcher(deps: DispatcherDeps): Dispatcher {
  const sweepEveryMs = deps.sweepEveryMs ?? 5000;
  const batchSize = deps.batchSize ?? 200;
  const concurrency = deps.concurrency ?? 16;
  let lastSweep = 0;
  const waker = startWaker(deps.temporal, deps.taskQueue, concurrency);

  /** One batch; returns how many events it dispatched. */
  async function dispatchBatch(): Promise<number> {
    const started = Date.now();
    const { events, targets, wakes, skipped } = await deps.db.transaction(async (trx) => {
      const query = trx('events')
        .whereNull('dispatched_at')
        .orderBy('created_at')
        .limit(batchSize)
        .forUpdate()
        .skipLocked()
        .select('id', 'merchant_id', 'mode', 'type', 'target_endpoint_id', 'traceparent', 'created_at');
      if (deps.merchantIds) query.whereIn('merchant_id', [...deps.merchantIds]);
      const events: Array<DispatchableEvent & { created_at: Date }> = await query;
      if (events.length === 0) return { events, targets: new Map<string, string[]>(), wakes: [], skipped: 0 };
      const targets = await endpointsFor(trx, events, { enabledOnly: false });
      const entries: QueueEntry[] = events.flatMap((e) =>
        (targets.get(e.id) ?? []).map((endpointId) => ({ eventId: e.id, endpointId })),
      );
      const counts = await enqueue(trx, entries, 0);
      await announceQueued(trx, [...counts.keys()]);
      // Between the batch's times too: the update then visits those days only (ordered by created_at).
      await trx('events')
        .whereIn(
          'id',
          events.map((e) => e.id),
        )
        .whereBetween('created_at', [events[0].created_at, events[events.length - 1].created_at])
        .update({ dispatched_at: trx.fn.now() });
      // An endpoint whose activity watches its queue hears of the rows at commit: no wake. The
      // watches stay locked until the commit, so an activity ending its watch sees these rows.
      const watched = await watchedEndpoints(trx, [...counts.keys()]);
      const described = await wakeTargets(
        trx,
        [...counts.keys()].filter((id) => !watched.has(id)),
      );
      const wakes = described.map((target) => ({ target, count: counts.get(target.id) }));
      return { events, targets, wakes, skipped: watched.size };
    });
    // Each event's fan-out, committed, in the trace that recorded the event.
    for (const e of events)
      recordInStoredTrace(e.traceparent, 'webhook dispatch', started, {
        'webhook.event_id': e.id,
        'webhook.endpoints': targets.get(e.id)?.length ?? 0,
      });
    for (const { target, count: rows } of wakes) waker.wake(target, rows);
    if (skipped > 0) webhookWakes.inc({ outcome: 'skipped' }, skipped);
    return events.length;
  }

  /** Wakes the workflows of endpoints whose queue rows stay overdue (at most once per sweep interval). */
  async function sweepOverdue(): Promise<void> {
    if (Date.now() - lastSweep < sweepEveryMs) return;
    lastSweep = Date.now();
    try {
      const ids = await overdueEndpoints(deps.db, OVERDUE_MS, deps.merchantIds);
      for (const target of await wakeTargets(deps.db, ids)) waker.wake(target);
    } catch (err) {
      log.warn('overdue webhook sweep failed; the next one retries', {
        error: err,
      });
    }
  }

  const loop = startNotifiedLoop({
    connection: deps.db.client.config.connection as string | ClientConfig,
    channel: EVENTS_CHANNEL,
    name: 'webhook dispatcher',
    everyMs: sweepEveryMs,
    batchSize,
    batch: dispatchBatch,
    beforePass: sweepOverdue,
    enabled: deps.merchantIds?.size !== 0,
  });
  return {
    /** Dispatches every undispatched event and sends the wakes that follow. */
    async drain() {
      await loop.drain();
      await waker.idle();
    },
    async stop() {
      await loop.stop();
      await waker.idle();
    },
  };
}
