import type { Db } from '../db/knex';
import { newId } from '../lib/ids';
import { OpsError } from './errors';

export interface SellerOut {
  seller_id: string;
  name: string;
  locations: Array<{ id: string; name: string }>;
}

/** Creates a seller with `locations` stock locations (the first is the primary; 0 makes none). */
export async function createSeller(db: Db, input: { name: string; locations?: number }): Promise<SellerOut> {
  const count = input.locations ?? 1;
  if (!input.name.trim()) throw new OpsError('invalid_name', 'name must not be blank');
  if (!Number.isInteger(count) || count < 0 || count > 100) {
    throw new OpsError('invalid_locations', 'locations must be an integer from 0 to 100');
  }
  const sellerId = newId('sel');
  const locations = Array.from({ length: count }, (_, i) => ({
    id: newId('loc'),
    name: i === 0 ? 'Primary warehouse' : `Location ${i + 1}`,
    position: i,
  }));
  await db.transaction(async (trx) => {
    await trx('sellers').insert({ id: sellerId, name: input.name.trim() });
    if (locations.length > 0) {
      await trx('stock_locations').insert(locations.map((l) => ({ ...l, seller_id: sellerId })));
    }
  });
  return { seller_id: sellerId, name: input.name.trim(), locations: locations.map(({ id, name }) => ({ id, name })) };
}
