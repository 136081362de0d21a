import type { Knex } from 'knex';
import { createIndexConcurrently } from '../src/db/concurrent-index';

/**
 * The seller console's inventory pages and keys' "last used" (docs/console.md).
 *
 * `partner_keys.last_used_at` and `checkout_keys.last_used_at`: when a request last authenticated
 * with the key, written at most once a minute per key (src/keys/last-used.ts). Nullable columns
 * without a default: no rewrite, an instant's lock (the runner's 1 s lock timeout, tried again).
 * The previous release neither reads nor writes them.
 *
 * `variants_seller_sku_c` (seller_id, sku COLLATE "C", product_id, id): the inventory list, one row
 * per SKU (its oldest product's variant, the one every route addresses) in SKU order, keyset-paged
 * and searched by SKU prefix (LIKE with a C-collation key is an index range whatever the
 * database's collation), so a page reads its 50 entries and no more however many SKUs the seller
 * has. `stock_adjustments_variant_time` (variant_id, created_at, id): a SKU's adjustment history,
 * newest first, keyset-paged (the (variant_id) index left a sort of the variant's whole history).
 *
 * Both indexes are built CONCURRENTLY (`createIndexConcurrently`: writers go on meanwhile, and an
 * invalid copy a failed build left is dropped first, so the migration can run again); a build over
 * a year of rows may take minutes, hence the longer statement timeout.
 */
export const config = { transaction: false };

/** Nullable columns and indexes built CONCURRENTLY only. */
export const phase = 'expand';

export const timeouts = { statementMs: 30 * 60_000 };

const INDEXES = [
  { name: 'variants_seller_sku_c', on: 'variants (seller_id, sku COLLATE "C", product_id, id)' },
  { name: 'stock_adjustments_variant_time', on: 'stock_adjustments (variant_id, created_at, id)' },
];

export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE partner_keys ADD COLUMN IF NOT EXISTS last_used_at timestamptz(3)');
  await knex.raw('ALTER TABLE checkout_keys ADD COLUMN IF NOT EXISTS last_used_at timestamptz(3)');
  for (const index of INDEXES) await createIndexConcurrently(knex, index.name, index.on);
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
