import type { Db } from '../db/knex';
import { iso } from '../lib/time';
import { isStorableText } from '../lib/text';

/**
 * A SKU's inventory item as the seller's dashboard shows it: the variant every route addresses by
 * the SKU (its oldest product's, docs/decisions.md "A SKU on several products"), its list price,
 * its level at the primary location (what `PATCH /inventory/bulk` sets; null without a stock row)
 * and its stock summed over locations.
 */
export interface InventoryItem {
  variant_id: string;
  sku: string;
  product_id: string;
  title: string;
  options: Record<string, string>;
  price: number;
  sale_price: number | null;
  /** More than one variant on the product: the list price is not set by SKU (single-variant products only). */
  multi_variant: boolean;
  /** The seller's primary stock location; null when it has none. */
  location_id: string | null;
  /** The level at the primary location, exactly as stored (numeric, may be fractional); null without a row. */
  on_hand: string | null;
  stocked_quantity: number;
}

/** The addressed variant of a SKU: no variant of the seller with the same SKU comes before it. */
const ADDRESSED = `NOT EXISTS (SELECT 1 FROM variants w
   WHERE w.seller_id = v.seller_id AND w.sku = v.sku AND (w.product_id, w.id) < (v.product_id, v.id))`;

/**
 * The item's columns over `v` (the variants chosen) and `loc` (the primary location); the product's
 * title by its key, row by row (a join may hash the seller's whole catalog for one page).
 */
const ITEM_COLUMNS = `v.id AS variant_id, v.sku, v.product_id,
  (SELECT p.title FROM products p WHERE p.id = v.product_id) AS title, v.options, v.price, v.sale_price,
  v.variant_count > 1 AS multi_variant, loc.id AS location_id,
  (SELECT sl.level::text FROM stock_levels sl WHERE sl.variant_id = v.id AND sl.location_id = loc.id) AS on_hand,
  COALESCE((SELECT SUM(ROUND(sl.level)) FROM stock_levels sl WHERE sl.variant_id = v.id), 0)::bigint AS stocked_quantity`;

const PRIMARY_LOCATION = `LEFT JOIN LATERAL (
  SELECT id FROM stock_locations WHERE seller_id = v.seller_id ORDER BY position LIMIT 1) loc ON true`;

/** `LIKE` text matching `prefix` and anything after it. */
const likePrefix = (prefix: string) => `${prefix.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/**
 * One page of the seller's inventory, one item per SKU in SKU order (code point order, whatever
 * the database's collation), optionally only SKUs starting with `prefix`, after the SKU `after`.
 * Keyset-paged on `variants_seller_sku_c`: a page reads its own rows and no more, however many
 * SKUs the seller has.
 */
export async function listInventory(
  db: Db,
  sellerId: string,
  opts: { prefix?: string; after?: string; limit: number },
): Promise<{ items: InventoryItem[]; hasMore: boolean }> {
  if ((opts.prefix !== undefined && !isStorableText(opts.prefix)) || (opts.after && !isStorableText(opts.after)))
    return { items: [], hasMore: false };
  const where: string[] = ['v.seller_id = ?'];
  const bindings: string[] = [sellerId];
  if (opts.after !== undefined) {
    where.push('v.sku COLLATE "C" > ?');
    bindings.push(opts.after);
  }
  if (opts.prefix) {
    where.push('v.sku COLLATE "C" LIKE ?');
    bindings.push(likePrefix(opts.prefix));
  }
  const { rows } = await db.raw(
    `WITH page AS (
       SELECT DISTINCT ON (v.sku COLLATE "C") v.* FROM variants v
        WHERE ${where.join(' AND ')}
        ORDER BY v.sku COLLATE "C", v.product_id, v.id
        LIMIT ?
     )
     SELECT ${ITEM_COLUMNS}
       FROM page v ${PRIMARY_LOCATION}
      ORDER BY v.sku COLLATE "C"`,
    [...bindings, opts.limit + 1],
  );
  return { items: rows.slice(0, opts.limit), hasMore: rows.length > opts.limit };
}

/** The seller's inventory item of variant `variantId`; null for another seller's, none, or a SKU's later variant. */
export async function findInventoryItem(db: Db, sellerId: string, variantId: string): Promise<InventoryItem | null> {
  if (!isStorableText(variantId)) return null;
  const { rows } = await db.raw(
    `SELECT ${ITEM_COLUMNS}
       FROM variants v ${PRIMARY_LOCATION}
      WHERE v.id = ? AND v.seller_id = ? AND ${ADDRESSED}`,
    [variantId, sellerId],
  );
  return rows[0] ?? null;
}

/** Where a page of adjustments ends: the last row's created_at and id. */
export interface AdjustmentsKey {
  at: Date;
  id: string;
}

export interface AdjustmentRow {
  adjustment_id: string;
  delta: number;
  /** The level at the location after the adjustment (numeric, as stored). */
  level_after: string;
  reason: string;
  category: string;
  unit_value: string | null;
  location_id: string;
  /** The Partner key that made it; null when the seller's console did. */
  api_key_id: string | null;
  created_at: string;
}

/** One page of the adjustments of the seller's variant, newest first, keyset-paged on (created_at, id). */
export async function listAdjustments(
  db: Db,
  sellerId: string,
  variantId: string,
  opts: { after?: AdjustmentsKey; limit: number },
): Promise<{ rows: AdjustmentRow[]; hasMore: boolean; lastKey: AdjustmentsKey | null }> {
  const query = db('stock_adjustments')
    .where({ variant_id: variantId, seller_id: sellerId })
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ])
    .limit(opts.limit + 1)
    .select(
      'id',
      'delta',
      'level_after',
      'reason',
      'category',
      'unit_value',
      'location_id',
      'api_key_id',
      'created_at',
    );
  if (opts.after) query.andWhereRaw('(created_at, id) < (?::timestamptz, ?)', [opts.after.at, opts.after.id]);
  const rows: Array<Record<string, any>> = await query;
  const page = rows.slice(0, opts.limit);
  const last = page.at(-1);
  return {
    rows: page.map((r) => ({
      adjustment_id: r.id,
      delta: r.delta,
      level_after: String(r.level_after),
      reason: r.reason,
      category: r.category,
      unit_value: r.unit_value === null ? null : String(r.unit_value),
      location_id: r.location_id,
      api_key_id: r.api_key_id,
      created_at: iso(r.created_at)!,
    })),
    hasMore: rows.length > opts.limit,
    lastKey: last ? { at: new Date(last.created_at), id: last.id } : null,
  };
}
