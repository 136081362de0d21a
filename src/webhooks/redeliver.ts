import { mapLimited } from '../lib/concurrency';
import { getEvent } from '../checkout/events';
import { ApiError } from '../http/errors';
import type { MerchantScope, WebhookDeps } from './deps';
import { DispatchableEvent, endpointsFor, signalDelivery } from './dispatch';

/**
 * `POST /events/{id}/redeliver`: queues the event again to every enabled endpoint subscribed to it,
 * as a new generation (attempt 1 again, a new body timestamp and signature, the same event id).
 * Answers only once every workflow has the signal, so a 202 is never lost.
 */
export async function redeliverEvent(deps: WebhookDeps, scope: MerchantScope, eventId: string): Promise<number> {
  const event = (await getEvent(deps.db, scope, eventId)) as DispatchableEvent | null;
  if (!event) throw ApiError.notFound('event_not_found', 'No such event.');
  const endpointIds = (await endpointsFor(deps.db, [event], { enabledOnly: true })).get(event.id) ?? [];
  if (endpointIds.length === 0) return 0;
  const { rows } = await deps.db.raw(`SELECT nextval('webhook_delivery_generations') AS generation`);
  const generation = Number(rows[0].generation);
  await mapLimited(endpointIds, 8, (endpointId) =>
    signalDelivery(deps.temporal, deps.taskQueue, endpointId, { eventIds: [eventId], generation }),
  );
  return endpointIds.length;
}
