import type { Db } from '../db/knex';
import { OpsError } from './errors';

export interface VariantRow {
  id: string;
  offer_id: string;
  product_id: string;
  seller_id: string;
  sku: string;
  price: number;
  sale_price: number | null;
}

/** Throws `seller_not_found` unless the seller exists. */
export async function requireSeller(db: Db, sellerId: string): Promise<void> {
  const seller = await db('sellers').where({ id: sellerId }).first('id');
  if (!seller) throw new OpsError('seller_not_found', `no seller ${sellerId}`);
}

/** The seller's variant with `sku`; when several share the SKU, the oldest (ids are time-ordered). */
export async function findSellerVariant(db: Db, sellerId: string, sku: string): Promise<VariantRow> {
  await requireSeller(db, sellerId);
  const variant: VariantRow | undefined = await db('variants')
    .where({ seller_id: sellerId, sku })
    .orderBy('id')
    .first('id', 'offer_id', 'product_id', 'seller_id', 'sku', 'price', 'sale_price');
  if (!variant) throw new OpsError('product_not_found', `seller ${sellerId} has no variant with SKU ${sku}`);
  return variant;
}

/** The seller's primary stock location (position 0), or null when the seller has none. */
export async function primaryLocationId(db: Db, sellerId: string): Promise<string | null> {
  const row = await db('stock_locations').where({ seller_id: sellerId }).orderBy('position').first('id');
  return row?.id ?? null;
}
