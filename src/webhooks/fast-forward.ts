/** Fast-forward (test mode): moves an endpoint's retry and failure clocks earlier and wakes its workflow. */
import { handOff, recordHandoff } from '../temporal/handoffs';
import type { MerchantScope, WebhookDeps } from './deps';
import { wakeTargets } from './route-and-wake';
import type { EndpointRow } from './endpoint-row';
import { endpointNotFound } from './endpoints';

/**
 * `POST /test_helpers/webhook_endpoints/{id}/fast_forward` (test keys only): moves the endpoint's
 * clocks `seconds` earlier, as if that time had passed: each pending retry's `next_attempt_at`
 * (not a delivery in flight) and the 3-day failure clock (`failing_since`). The endpoint's
 * workflow is woken through a handoff written in the same transaction; it sends what is now due
 * and disables the endpoint if its 3 days are up, with the same events and e-mail as in real time.
 */
export async function fastForwardEndpoint(
  deps: WebhookDeps,
  scope: MerchantScope,
  endpointId: string,
  seconds: number,
): Promise<EndpointRow> {
  const { endpoint, pending } = await deps.db.transaction(async (trx) => {
    const earlier = (column: string) => trx.raw(`${column} - make_interval(secs => ?)`, [seconds]);
    // One statement finds the endpoint (none: 404) and moves its failure clock.
    const [moved]: EndpointRow[] = await trx('webhook_endpoints')
      .where({ id: endpointId, merchant_id: scope.merchantId, mode: scope.mode })
      .update({ failing_since: earlier('failing_since') })
      .returning('*');
    if (!moved) throw endpointNotFound();
    await trx('webhook_queue')
      .where({ endpoint_id: endpointId })
      .whereNull('claim')
      .update({ next_attempt_at: earlier('next_attempt_at') });
    const [target] = await wakeTargets(trx, [endpointId]);
    return { endpoint: moved, pending: await recordHandoff(trx, scope, { kind: 'endpoint_wake', endpoint: target }) };
  });
  await handOff(deps, [pending]);
  return endpoint;
}
