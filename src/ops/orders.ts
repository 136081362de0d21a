import type { Db } from '../db/knex';
import { newId, randomString } from '../lib/ids';
import { intInRange, money } from './checks';
import { OpsError } from './errors';
import { findSellerVariant, requireSeller } from './lookups';

/** The marketplace's terms for a new order's settlement. */
export const settlementTerms = { commissionPercent: 10, holdDays: 7 } as const;

/** Shipping address for orders placed from the CLI (stand-ins for the marketplace checkout). */
export const demoShippingAddress = {
  first_name: 'Zainab',
  last_name: 'Ali',
  address_1: '12 Al-Rasheed Street',
  city: 'Baghdad',
  phone: '+9647701234567',
} as const;

const INCREMENT_ID_ATTEMPTS = 5;

export interface OrderItemIn {
  sku: string;
  quantity: number;
  /** Defaults to the variant's current effective price (sale price while a campaign runs). */
  unitPrice?: number;
}

export interface OrderOut {
  order_id: string;
  increment_id: string;
  seller_id: string;
  status: 'pending';
  total: number;
  currency: string;
  created_at: string;
  items: Array<{
    item_id: string;
    variant_id: string;
    external_sku: string;
    title: string;
    quantity: number;
    unit_price: number;
  }>;
  settlement: {
    status: 'held';
    commission_percent: number;
    commission_amount: number;
    earnings: number;
    hold_days: number;
  };
}

/** A human order number: nine digits, not starting with 0. */
function incrementId(): string {
  return `${randomString(1, '123456789')}${randomString(8, '0123456789')}`;
}

/** Resolves each item to the seller's variant (by SKU) and its product title. */
async function resolveItems(db: Db, sellerId: string, items: OrderItemIn[]): Promise<OrderOut['items']> {
  const out: OrderOut['items'] = [];
  for (const item of items) {
    const quantity = intInRange(item.quantity, 'quantity', 1, 1_000_000);
    const variant = await findSellerVariant(db, sellerId, item.sku);
    const product = await db('products').where({ id: variant.product_id }).first('title');
    const unitPrice = money(item.unitPrice ?? variant.sale_price ?? variant.price, 'unit_price');
    out.push({
      item_id: newId('item'),
      variant_id: variant.id,
      external_sku: variant.sku,
      title: product.title,
      quantity,
      unit_price: unitPrice,
    });
  }
  return out;
}

/**
 * Places an order with the seller as the marketplace checkout would: a pending order, its items
 * with the SKU at the time, and a held settlement whose created_at is the order's.
 */
export async function createOrder(
  db: Db,
  input: { sellerId: string; items: OrderItemIn[]; createdAt?: Date },
): Promise<OrderOut> {
  await requireSeller(db, input.sellerId);
  if (input.items.length === 0) throw new OpsError('invalid_items', 'an order needs at least one item');
  if (input.createdAt && Number.isNaN(input.createdAt.getTime())) {
    throw new OpsError('invalid_created_at', 'created_at is not a valid time');
  }
  const items = await resolveItems(db, input.sellerId, input.items);
  const total = items.reduce((sum, i) => sum + i.unit_price * i.quantity, 0);
  const commissionAmount = Math.round((total * settlementTerms.commissionPercent) / 100);
  const orderId = newId('ord');
  const createdAt = input.createdAt ?? new Date();

  const increment = await db.transaction(async (trx) => {
    let placed: string | undefined;
    for (let attempt = 0; attempt < INCREMENT_ID_ATTEMPTS && !placed; attempt++) {
      const candidate = incrementId();
      const inserted = await trx('orders')
        .insert({
          id: orderId,
          seller_id: input.sellerId,
          increment_id: candidate,
          status: 'pending',
          total,
          currency: 'IQD',
          shipping_address: JSON.stringify(demoShippingAddress),
          created_at: createdAt,
          updated_at: createdAt,
        })
        .onConflict('increment_id')
        .ignore()
        .returning('id');
      if (inserted.length > 0) placed = candidate;
    }
    if (!placed) throw new Error('could not allocate a unique increment_id');
    await trx('order_items').insert(
      items.map((item, position) => ({
        id: item.item_id,
        order_id: orderId,
        variant_id: item.variant_id,
        external_sku: item.external_sku,
        title: item.title,
        quantity: item.quantity,
        unit_price: item.unit_price,
        position,
      })),
    );
    await trx('settlements').insert({
      order_id: orderId,
      seller_id: input.sellerId,
      status: 'held',
      commission_percent: settlementTerms.commissionPercent,
      commission_amount: commissionAmount,
      earnings: total - commissionAmount,
      hold_days: settlementTerms.holdDays,
      created_at: createdAt,
    });
    return placed;
  });

  return {
    order_id: orderId,
    increment_id: increment,
    seller_id: input.sellerId,
    status: 'pending',
    total,
    currency: 'IQD',
    created_at: createdAt.toISOString(),
    items,
    settlement: {
      status: 'held',
      commission_percent: settlementTerms.commissionPercent,
      commission_amount: commissionAmount,
      earnings: total - commissionAmount,
      hold_days: settlementTerms.holdDays,
    },
  };
}
