import type { Db } from '../db/knex';
import { OpsError } from './errors';
import { findSellerVariant } from './lookups';

const LEVEL_PATTERN = /^\d{1,12}(\.\d{1,6})?$/;

/** Sets the absolute stock level of the seller's variant at one of the seller's locations (upsert). */
export async function setStockLevel(
  db: Db,
  input: { sellerId: string; sku: string; locationId: string; level: string | number },
): Promise<{ variant_id: string; location_id: string; level: number }> {
  const level = String(input.level);
  if (!LEVEL_PATTERN.test(level)) {
    throw new OpsError('invalid_level', 'level must be a number 0 or more (fractions allowed, e.g. 2.5)');
  }
  const variant = await findSellerVariant(db, input.sellerId, input.sku);
  const location = await db('stock_locations').where({ id: input.locationId, seller_id: input.sellerId }).first('id');
  if (!location)
    throw new OpsError('location_not_found', `seller ${input.sellerId} has no location ${input.locationId}`);
  const [row] = await db('stock_levels')
    .insert({ variant_id: variant.id, location_id: location.id, level })
    .onConflict(['variant_id', 'location_id'])
    .merge({ level, updated_at: db.fn.now() })
    .returning(['variant_id', 'location_id', 'level']);
  return { variant_id: row.variant_id, location_id: row.location_id, level: Number(row.level) };
}
