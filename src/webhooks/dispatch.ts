import type { Client } from '@temporalio/client';
import type { Db } from '../db/knex';
import type { KeyMode } from '../keys/keys';
import { DeliverRequest, deliverSignal, DeliveryWorkflowInput, deliveryWorkflowType } from './delivery-messages';
import { subscribes } from './endpoint-row';

/** The event columns fan-out reads. */
export interface DispatchableEvent {
  id: string;
  merchant_id: string;
  mode: KeyMode;
  type: string;
  /** Set only on a `test` route event: it goes to that endpoint alone. */
  target_endpoint_id: string | null;
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

/**
 * Hands deliveries to an endpoint's workflow (workflow id = endpoint id), starting it if needed.
 * Idempotent: the workflow ignores an event and generation it already has.
 */
export async function signalDelivery(
  temporal: Client,
  taskQueue: string,
  endpointId: string,
  request: DeliverRequest,
): Promise<void> {
  const input: DeliveryWorkflowInput = { endpointId };
  await temporal.workflow.signalWithStart(deliveryWorkflowType, {
    workflowId: endpointId,
    taskQueue,
    args: [input],
    signal: deliverSignal,
    signalArgs: [request],
  });
}
