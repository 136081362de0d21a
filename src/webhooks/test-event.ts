/** Test event: records a sample event for one endpoint; fan-out then delivers it like any other. */
import { EventType, recordEvent } from '../checkout/events';
import { ApiError } from '../http/errors';
import { newId } from '../lib/ids';
import type { MerchantScope, WebhookDeps } from './deps';

/**
 * `POST /webhook_endpoints/{id}/test`: records a synthetic event of `type` for this endpoint alone
 * (listed in `GET /events`); it is dispatched, signed and delivered like any other. Its
 * `data.object` is a sample marker whose id is a session id that does not exist.
 */
export async function sendTestEvent(
  deps: Pick<WebhookDeps, 'db' | 'clock'>,
  scope: MerchantScope,
  endpointId: string,
  type: EventType,
): Promise<{ eventId: string }> {
  return deps.db.transaction(async (trx) => {
    const endpoint = await trx('webhook_endpoints')
      .where({ id: endpointId, merchant_id: scope.merchantId, mode: scope.mode })
      .first('id');
    if (!endpoint) throw ApiError.notFound('endpoint_not_found', 'No such webhook endpoint.');
    const marker = { id: newId('cs', scope.mode), object: 'checkout.session', sample: true, type };
    const event = await recordEvent(trx, { ...scope, type, object: marker, now: deps.clock() });
    await trx('events')
      .where({ id: event.id, created_at: event.created_at })
      .update({ target_endpoint_id: endpointId });
    return { eventId: event.id };
  });
}
