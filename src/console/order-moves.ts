/** The console's order moves (accept, ship, cancel), one order at a time, for the single and the bulk actions. */
import type { Db } from '../db/knex';
import { isStorableText } from '../lib/text';
import { OpsError } from '../ops/errors';
import { setOrderStatus } from '../ops/order-status';

/**
 * The moves a seller makes in the console and the statuses each starts from (docs/decisions.md,
 * "Order moves"): accepting twice, or shipping a shipped order again, is not a console move.
 */
export const MOVES = {
  accept: { to: 'accepted', from: ['pending'], done: 'order_accepted' },
  ship: { to: 'shipped', from: ['pending', 'accepted'], done: 'order_shipped' },
  cancel: { to: 'cancelled', from: ['pending', 'accepted'], done: 'order_cancelled' },
} as const;
export type Move = keyof typeof MOVES;

export type MoveOutcome =
  | { outcome: 'done' }
  /** Not the seller's order (or none). */
  | { outcome: 'not_found' }
  /** The order's status does not allow the move; `status` is the one it has. */
  | { outcome: 'invalid_transition'; status: string };

/**
 * Moves the seller's order through the operator CLI's service (`setOrderStatus`, one conditional
 * UPDATE), limited to the seller's own orders and to the moves above; ship with its carrier and
 * tracking number.
 */
export async function moveOrderOf(
  db: Db,
  sellerId: string,
  orderId: string,
  move: Move,
  shipment: { carrier: string; tracking: string } | null = null,
): Promise<MoveOutcome> {
  if (!isStorableText(orderId)) return { outcome: 'not_found' };
  const statusOf = async () =>
    (await db('orders').where({ id: orderId, seller_id: sellerId }).first('status'))?.status as string | undefined;
  const status = await statusOf();
  if (status === undefined) return { outcome: 'not_found' };
  if (!(MOVES[move].from as readonly string[]).includes(status)) return { outcome: 'invalid_transition', status };
  try {
    await setOrderStatus(db, { orderId, sellerId, status: MOVES[move].to, ...(shipment ?? {}) });
  } catch (err) {
    if (err instanceof OpsError && err.code === 'invalid_transition')
      return { outcome: 'invalid_transition', status: (await statusOf()) ?? status };
    if (err instanceof OpsError && err.code === 'order_not_found') return { outcome: 'not_found' };
    throw err;
  }
  return { outcome: 'done' };
}
