/** Replay a window: queues an endpoint's events of a time range again as a new generation (not workflow replay). */
import { EVENT_RETENTION_MS, listedEvents } from '../checkout/events';
import { ApiError } from '../http/errors';
import { newId } from '../lib/ids';
import { iso } from '../lib/time';
import type { MerchantScope, WebhookDeps } from './deps';
import { wakeAll, wakeTargets } from './route-and-wake';
import { subscribes } from './endpoint-row';
import { enqueue } from './queue';
import { newGeneration } from './redeliver';
import type { ReplayIn } from './schemas';

/** A replay's window is at most this long, and starts no earlier than this long ago (the events' retention). */
export const REPLAY_WINDOW_MS = EVENT_RETENTION_MS;
/** Events one replay may queue; a larger window is refused (replay it in parts). */
export const REPLAY_MAX_EVENTS = 10_000;

interface ReplayRow {
  id: string;
  endpoint_id: string;
  since: Date;
  until: Date;
  types: string[] | null;
  queued: number;
  created_at: Date;
}

/** The replay object of the 202. */
export function replayOut(row: ReplayRow) {
  return {
    id: row.id,
    object: 'webhook_replay',
    endpoint_id: row.endpoint_id,
    since: iso(row.since),
    until: iso(row.until),
    types: row.types,
    queued: row.queued,
    created_at: iso(row.created_at),
  };
}

/**
 * `POST /webhook_endpoints/{id}/replay`: queues every event of the endpoint's merchant and mode
 * created in [since, until) that the endpoint subscribes to (and of `types`, when given) as new
 * deliveries in one new generation, through the normal schedule. The window is at most 30 days
 * and starts within the last 30 days; at most 10,000 events per call. One row per Idempotency-Key
 * and endpoint, written with the queue rows: the same key never queues twice. `undeliveredOnly`
 * (the console's recover) keeps only the events on the endpoint's undelivered list.
 */
export async function replayWindow(
  deps: WebhookDeps,
  scope: MerchantScope,
  endpointId: string,
  idempotencyKey: string,
  input: ReplayIn,
  opts: { undeliveredOnly?: boolean } = {},
): Promise<ReplayRow> {
  const since = new Date(input.since);
  const until = new Date(input.until);
  const now = deps.clock().getTime();
  if (until <= since) {
    throw ApiError.validation('until must be after since.', [{ field: 'until', issue: 'not_after_since' }]);
  }
  if (until.getTime() - since.getTime() > REPLAY_WINDOW_MS) {
    throw ApiError.validation('The window is at most 30 days.', [{ field: 'until', issue: 'window_too_long' }]);
  }
  if (since.getTime() < now - REPLAY_WINDOW_MS) {
    throw ApiError.validation('Events are kept 30 days: since must be within the last 30 days.', [
      { field: 'since', issue: 'beyond_retention' },
    ]);
  }
  const row = await deps.db.transaction(async (trx) => {
    const endpoint = await trx('webhook_endpoints')
      .where({ id: endpointId, merchant_id: scope.merchantId, mode: scope.mode })
      .forShare()
      .first('id', 'status', 'events');
    if (!endpoint) throw ApiError.notFound('endpoint_not_found', 'No such webhook endpoint.');
    const done: ReplayRow | undefined = await trx('webhook_replays')
      .where({ endpoint_id: endpointId, idempotency_key: idempotencyKey })
      .first();
    if (done) return { row: done, fresh: false };
    if (endpoint.status !== 'enabled') {
      throw ApiError.conflict(
        'endpoint_disabled',
        'The endpoint is disabled: enable it before replaying events to it.',
      );
    }
    const query = listedEvents(trx, scope)
      .where('created_at', '>=', since)
      .where('created_at', '<', until)
      .where((q) => q.whereNull('target_endpoint_id').orWhere('target_endpoint_id', endpointId))
      .orderBy('created_at')
      .limit(REPLAY_MAX_EVENTS + 1)
      .select('id', 'type', 'target_endpoint_id');
    if (input.types) query.whereIn('type', input.types);
    // The console's "recover": only the events this endpoint has not had delivered (its undelivered list).
    if (opts.undeliveredOnly) {
      query.whereExists((q) =>
        q
          .select(trx.raw('1'))
          .from('webhook_undelivered as u')
          .whereRaw('u.event_id = events.id')
          .where('u.endpoint_id', endpointId),
      );
    }
    const events: Array<{ id: string; type: string; target_endpoint_id: string | null }> = await query;
    const wanted = events.filter((e) => e.target_endpoint_id !== null || subscribes(endpoint.events, e.type));
    if (events.length > REPLAY_MAX_EVENTS) {
      throw ApiError.validation(`The window holds more than ${REPLAY_MAX_EVENTS} events: replay it in parts.`, [
        { field: 'until', issue: 'too_many_events' },
      ]);
    }
    const generation = await newGeneration(trx);
    await enqueue(
      trx,
      wanted.map((e) => ({ eventId: e.id, endpointId })),
      generation,
    );
    const [inserted] = await trx('webhook_replays')
      .insert({
        id: newId('wr'),
        endpoint_id: endpointId,
        merchant_id: scope.merchantId,
        mode: scope.mode,
        idempotency_key: idempotencyKey,
        since,
        until,
        types: input.types ? JSON.stringify(input.types) : null,
        generation,
        queued: wanted.length,
        created_at: new Date(now),
      })
      .returning('*');
    return { row: inserted as ReplayRow, fresh: true };
  });
  if (row.fresh && row.row.queued > 0) {
    const targets = await wakeTargets(deps.db, [endpointId]);
    await wakeAll(
      deps.temporal,
      deps.taskQueue,
      targets.map((target) => ({ target, count: row.row.queued })),
      1,
    );
  }
  return row.row;
}
