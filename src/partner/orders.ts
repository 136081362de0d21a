import { iso } from '../lib/time';
import { isStorableText } from '../lib/text';
import type { Db } from '../db/knex';
import type { OrdersKey } from './schemas';

interface SummaryRow {
  id: string;
  increment_id: string;
  status: string;
  total: number;
  currency: string;
  placed_at: Date;
}

function summaryOut(r: SummaryRow) {
  return {
    order_id: r.id,
    increment_id: r.increment_id,
    status: r.status,
    total: r.total,
    currency: r.currency,
    created_at: iso(r.placed_at),
  };
}

/**
 * One page of the seller's orders, newest first by the settlement record's creation (when the
 * order was placed with this seller), keyset-paged on (created_at, order id).
 */
export async function listOrders(
  db: Db,
  sellerId: string,
  opts: { since?: Date; after?: OrdersKey; limit: number; status?: string },
) {
  const query = db('settlements as s')
    .join('orders as o', 'o.id', 's.order_id')
    .where('s.seller_id', sellerId)
    .andWhere('o.seller_id', sellerId)
    .orderBy([
      { column: 's.created_at', order: 'desc' },
      { column: 's.order_id', order: 'desc' },
    ])
    .limit(opts.limit + 1)
    .select('o.id', 'o.increment_id', 'o.status', 'o.total', 'o.currency', 's.created_at as placed_at');
  if (opts.since) query.andWhere('s.created_at', '>=', opts.since);
  if (opts.status) query.andWhere('o.status', opts.status);
  if (opts.after) {
    query.andWhereRaw('(s.created_at, s.order_id) < (?::timestamptz, ?)', [opts.after.placedAt, opts.after.id]);
  }
  const rows: SummaryRow[] = await query;
  const page = rows.slice(0, opts.limit);
  const last = page[page.length - 1];
  return {
    data: page.map(summaryOut),
    hasMore: rows.length > opts.limit,
    lastKey: last ? { placedAt: new Date(last.placed_at), id: last.id } : null,
  };
}

/** The seller's order with items, shipping address and settlement; null for none or another seller's. */
export async function getOrder(db: Db, sellerId: string, orderId: string) {
  if (!isStorableText(orderId)) return null;
  const row = await db('orders as o')
    .join('settlements as s', 's.order_id', 'o.id')
    .where({ 'o.id': orderId, 'o.seller_id': sellerId, 's.seller_id': sellerId })
    .first(
      'o.*',
      's.created_at as placed_at',
      's.status as settlement_status',
      's.commission_percent',
      's.commission_amount',
      's.earnings',
      's.hold_days',
      's.hold_starts_at',
      's.funds_released_at',
      's.delivery_confirmation_source',
    );
  if (!row) return null;
  const items = await db('order_items').where({ order_id: orderId }).orderBy('position').select();
  const address = row.shipping_address ?? {};
  return {
    ...summaryOut(row),
    shipping_address: {
      first_name: address.first_name ?? '',
      last_name: address.last_name ?? '',
      address_1: address.address_1 ?? '',
      city: address.city ?? '',
      phone: address.phone ?? '',
    },
    items: items.map((i) => ({
      item_id: i.id,
      title: i.title,
      quantity: i.quantity,
      unit_price: i.unit_price,
      variant_id: i.variant_id,
      external_sku: i.external_sku,
    })),
    accepted_at: iso(row.accepted_at),
    shipped_at: iso(row.shipped_at),
    tracking_number: row.tracking_number,
    carrier: row.carrier,
    settlement: {
      status: row.settlement_status,
      commission_percent: Number(row.commission_percent),
      commission_amount: row.commission_amount,
      earnings: row.earnings,
      hold_days: row.hold_days,
      hold_starts_at: iso(row.hold_starts_at),
      funds_released_at: iso(row.funds_released_at),
      delivery_confirmation_source: row.delivery_confirmation_source,
    },
  };
}
