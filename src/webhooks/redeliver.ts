/** Redeliver: queues one event again to its endpoints as a new generation, then wakes their workflows. */
import { getEvent } from '../checkout/events';
import { ApiError } from '../http/errors';
import type { MerchantScope, WebhookDeps } from './deps';
import { DispatchableEvent, endpointsFor, wakeAll, wakeTargets } from './route-and-wake';
import { enqueue } from './queue';

/** A new generation number: each redelivery and each replay queues its deliveries under its own. */
export async function newGeneration(db: WebhookDeps['db']): Promise<number> {
  const { rows } = await db.raw(`SELECT nextval('webhook_delivery_generations') AS generation`);
  return Number(rows[0].generation);
}

/**
 * `POST /events/{id}/redeliver`: queues the event again to every enabled endpoint subscribed to it,
 * as a new generation (attempt 1 again, a new body timestamp and signature, the same event id).
 * The rows are committed before the 202; the endpoints' workflows are woken after.
 */
export async function redeliverEvent(deps: WebhookDeps, scope: MerchantScope, eventId: string): Promise<number> {
  const event = (await getEvent(deps.db, scope, eventId)) as DispatchableEvent | null;
  if (!event) throw ApiError.notFound('event_not_found', 'No such event.');
  const endpointIds = (await endpointsFor(deps.db, [event], { enabledOnly: true })).get(event.id) ?? [];
  if (endpointIds.length === 0) return 0;
  const generation = await newGeneration(deps.db);
  const counts = await enqueue(
    deps.db,
    endpointIds.map((endpointId) => ({ eventId, endpointId })),
    generation,
  );
  const targets = await wakeTargets(deps.db, [...counts.keys()]);
  await wakeAll(
    deps.temporal,
    deps.taskQueue,
    targets.map((target) => ({ target, count: counts.get(target.id) })),
    8,
  );
  return endpointIds.length;
}
