import type { Db } from '../db/knex';
import { nonBlank } from './checks';
import { iso } from '../lib/time';
import { OpsError } from './errors';

export const orderStatuses = ['pending', 'accepted', 'shipped', 'delivered', 'cancelled', 'returned'] as const;
export type OrderStatus = (typeof orderStatuses)[number];

/**
 * The statuses each status may be reached from. Forward moves may skip steps (the skipped
 * timestamps are filled); setting the current status again only updates tracking and carrier.
 */
const reachableFrom: Record<OrderStatus, readonly OrderStatus[]> = {
  pending: [],
  accepted: ['pending', 'accepted'],
  shipped: ['pending', 'accepted', 'shipped'],
  delivered: ['pending', 'accepted', 'shipped', 'delivered'],
  cancelled: ['pending', 'accepted', 'cancelled'],
  returned: ['shipped', 'delivered', 'returned'],
};

export interface OrderStatusOut {
  order_id: string;
  status: OrderStatus;
  accepted_at: string | null;
  shipped_at: string | null;
  tracking_number: string | null;
  carrier: string | null;
  settlement_status: string | null;
}

function isOrderStatus(value: string): value is OrderStatus {
  return (orderStatuses as readonly string[]).includes(value);
}

/**
 * Moves an order as the seller's dashboard would (the console passes `sellerId`: another
 * seller's order is then `order_not_found`), with one conditional UPDATE. Delivery starts the
 * settlement's hold; cancelling or returning reverses a settlement that is still held.
 */
export async function setOrderStatus(
  db: Db,
  input: { orderId: string; status: string; tracking?: string; carrier?: string; sellerId?: string },
): Promise<OrderStatusOut> {
  const to = input.status;
  if (!isOrderStatus(to)) throw new OpsError('invalid_status', `status must be one of ${orderStatuses.join(', ')}`);
  const tracking = input.tracking === undefined ? null : nonBlank(input.tracking, 'tracking');
  const carrier = input.carrier === undefined ? null : nonBlank(input.carrier, 'carrier');
  const reachesAccepted = to === 'accepted' || to === 'shipped' || to === 'delivered';
  const reachesShipped = to === 'shipped' || to === 'delivered';

  return db.transaction(async (trx) => {
    const changes: Record<string, unknown> = {
      status: to,
      tracking_number: trx.raw('coalesce(?, tracking_number)', [tracking]),
      carrier: trx.raw('coalesce(?, carrier)', [carrier]),
      updated_at: trx.fn.now(),
    };
    if (reachesAccepted) changes.accepted_at = trx.raw('coalesce(accepted_at, now())');
    if (reachesShipped) changes.shipped_at = trx.raw('coalesce(shipped_at, now())');
    const mine = { id: input.orderId, ...(input.sellerId !== undefined && { seller_id: input.sellerId }) };
    const [order] = await trx('orders')
      .where(mine)
      .whereIn('status', reachableFrom[to])
      .update(changes)
      .returning(['id', 'status', 'accepted_at', 'shipped_at', 'tracking_number', 'carrier']);
    if (!order) {
      const current = await trx('orders').where(mine).first('status');
      if (!current) throw new OpsError('order_not_found', `no order ${input.orderId}`);
      throw new OpsError('invalid_transition', `order ${input.orderId} is ${current.status}; it cannot become ${to}`);
    }
    const settlement = trx('settlements').where({ order_id: order.id });
    if (to === 'delivered') {
      await settlement.clone().update({
        hold_starts_at: trx.raw('coalesce(hold_starts_at, now())'),
        delivery_confirmation_source: trx.raw("coalesce(delivery_confirmation_source, 'operator')"),
      });
    } else if (to === 'cancelled' || to === 'returned') {
      await settlement.clone().where({ status: 'held' }).update({ status: 'reversed' });
    }
    const settled = await settlement.clone().first('status');
    return {
      order_id: order.id,
      status: order.status,
      accepted_at: iso(order.accepted_at),
      shipped_at: iso(order.shipped_at),
      tracking_number: order.tracking_number,
      carrier: order.carrier,
      settlement_status: settled?.status ?? null,
    };
  });
}
