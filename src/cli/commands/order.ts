import { OpsError } from '../../ops/errors';
import { setOrderStatus } from '../../ops/order-status';
import { createOrder, OrderItemIn } from '../../ops/orders';
import { splitList } from '../args';
import type { CommandTable } from '../command';

const WHOLE_NUMBER = /^\d+$/;

/** `SKU:QTY[:UNIT_PRICE],…` → items; a malformed entry is `invalid_flag` naming it. */
export function parseItems(value: string): OrderItemIn[] {
  const items = splitList(value).map((entry) => {
    const [sku, quantity, unitPrice, ...extra] = entry.split(':');
    const numbers = unitPrice === undefined ? [quantity] : [quantity, unitPrice];
    if (!sku || extra.length > 0 || !numbers.every((n) => n !== undefined && WHOLE_NUMBER.test(n))) {
      throw new OpsError('invalid_flag', `--items entry "${entry}" is not SKU:QTY or SKU:QTY:UNIT_PRICE`);
    }
    return { sku, quantity: Number(quantity), unitPrice: unitPrice === undefined ? undefined : Number(unitPrice) };
  });
  if (items.length === 0) throw new OpsError('invalid_flag', '--items needs at least one SKU:QTY');
  return items;
}

/** `order …`: orders placed with a seller and moved as its dashboard would. */
export const orderCommands: CommandTable = {
  'order create': {
    flags: { seller: 'value', items: 'value', 'created-at': 'value' },
    run: (f, { db }) =>
      createOrder(db, {
        sellerId: f.required('seller'),
        items: parseItems(f.required('items')),
        createdAt: f.timestamp('created-at'),
      }),
  },
  'order set-status': {
    flags: { order: 'value', status: 'value', tracking: 'value', carrier: 'value' },
    run: (f, { db }) =>
      setOrderStatus(db, {
        orderId: f.required('order'),
        status: f.required('status'),
        tracking: f.optional('tracking'),
        carrier: f.optional('carrier'),
      }),
  },
};
