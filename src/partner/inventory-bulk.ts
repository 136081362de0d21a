import type { Db } from '../db/knex';
import { log } from '../lib/log';
import { accepted, isObject, isWholeNumber, rejected, rowSku, RowResult, SKU_REQUIRED } from './rows';

interface InventoryRow {
  index: number;
  sku: string;
  onHand?: number;
  priceIqd?: number;
}

interface Target {
  variant_id: string;
  variant_count: number;
}

/** Validates a row before anything in it is written; a RowResult is a refusal. */
function readRow(raw: unknown, index: number): InventoryRow | RowResult {
  if (!isObject(raw)) return rejected(null, 'validation_error', 'The row is not an object.');
  const sku = rowSku(raw);
  if (sku === null) return rejected(null, 'validation_error', SKU_REQUIRED);
  const onHandSet = raw.on_hand !== undefined && raw.on_hand !== null;
  const priceSet = raw.price_iqd !== undefined && raw.price_iqd !== null;
  if (!onHandSet && !priceSet) return rejected(sku, 'validation_error', 'Set on_hand, price_iqd or both.');
  if (onHandSet && !isWholeNumber(raw.on_hand)) {
    return rejected(sku, 'validation_error', 'on_hand must be a whole number 0 or more.');
  }
  const row: InventoryRow = { index, sku };
  if (onHandSet) row.onHand = raw.on_hand as number;
  // A price_iqd of the wrong JSON type is dropped; a number that is not a whole number 0 or more is refused.
  if (typeof raw.price_iqd === 'number') {
    if (!isWholeNumber(raw.price_iqd)) {
      return rejected(sku, 'validation_error', 'price_iqd must be a whole number of dinars, 0 or more.');
    }
    row.priceIqd = raw.price_iqd;
  }
  return row;
}

/**
 * Keeps the last row per key, so one statement never touches a row twice (the later row wins),
 * sorted by key so that concurrent requests lock rows in the same order.
 */
function lastPer<T>(rows: T[], key: (r: T) => string): T[] {
  return [...new Map(rows.map((r) => [key(r), r])).entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([, r]) => r);
}

/**
 * `PATCH /inventory/bulk`: absolute stock at the primary location, then list prices, each as one
 * set-based statement for the whole batch. Results in request order; no audit entries.
 */
export async function bulkUpdateInventory(db: Db, sellerId: string, items: unknown[]): Promise<RowResult[]> {
  const results: RowResult[] = new Array(items.length);
  const rows: InventoryRow[] = [];
  items.forEach((raw, i) => {
    const row = readRow(raw, i);
    if ('sku' in row) rows.push(row);
    else results[i] = row;
  });
  if (rows.length === 0) return results;

  const [targetRows, location] = await Promise.all([
    db.raw(
      `SELECT DISTINCT ON (v.sku) v.sku, v.id AS variant_id,
              (SELECT count(*) FROM variants o WHERE o.product_id = v.product_id AND o.seller_id = v.seller_id)::int AS variant_count
         FROM variants v
        WHERE v.seller_id = ? AND v.sku = ANY(?)
        ORDER BY v.sku, v.product_id, v.id`,
      [sellerId, [...new Set(rows.map((r) => r.sku))]],
    ),
    db('stock_locations').where({ seller_id: sellerId }).orderBy('position').first('id'),
  ]);
  const targets = new Map<string, Target>(targetRows.rows.map((t: Target & { sku: string }) => [t.sku, t]));

  const stockWrites: Array<{ row: InventoryRow; target: Target }> = [];
  const priceWrites: Array<{ row: InventoryRow; target: Target }> = [];
  for (const row of rows) {
    const target = targets.get(row.sku);
    if (!target) {
      results[row.index] = rejected(row.sku, 'product_not_found', `No product has SKU ${row.sku}.`);
    } else if (row.onHand !== undefined && !location) {
      results[row.index] = rejected(
        row.sku,
        'inventory_item_not_found',
        'The seller has no stock location for on_hand.',
      );
    } else {
      if (row.onHand !== undefined) stockWrites.push({ row, target });
      if (row.priceIqd !== undefined) priceWrites.push({ row, target });
      results[row.index] = accepted(row.sku);
    }
  }

  if (stockWrites.length > 0) {
    const writes = lastPer(stockWrites, (w) => w.target.variant_id);
    try {
      await db.raw(
        `INSERT INTO stock_levels (variant_id, location_id, level, updated_at)
         SELECT u.variant_id, ?, u.level, now() FROM unnest(?::text[], ?::numeric[]) AS u(variant_id, level)
         ON CONFLICT (variant_id, location_id) DO UPDATE SET level = EXCLUDED.level, updated_at = EXCLUDED.updated_at`,
        [location!.id, writes.map((w) => w.target.variant_id), writes.map((w) => w.row.onHand!)],
      );
    } catch (err) {
      log.error('inventory stock write failed', {
        seller_id: sellerId,
        error: err instanceof Error ? err.message : String(err),
      });
      for (const { row } of stockWrites)
        results[row.index] = rejected(row.sku, 'internal_error', 'Stock could not be written; retry the row.');
    }
  }

  const pricable = priceWrites.filter(({ row }) => results[row.index].status === 'accepted');
  for (const { row, target } of pricable) {
    if (target.variant_count > 1) {
      results[row.index] = rejected(
        row.sku,
        'product_has_multiple_variants',
        'price_iqd applies to single-variant products only.',
      );
    }
  }
  const writes = lastPer(
    pricable.filter(({ target }) => target.variant_count === 1),
    (w) => w.target.variant_id,
  );
  if (writes.length > 0) {
    try {
      // During a markdown campaign the sale price is recomputed from the new list price.
      await db.raw(
        `UPDATE variants v
            SET price = u.price,
                sale_price = CASE WHEN v.campaign_percent IS NULL THEN v.sale_price
                                  ELSE round(u.price * (100 - v.campaign_percent)::numeric / 100) END,
                updated_at = now()
           FROM unnest(?::text[], ?::bigint[]) AS u(variant_id, price)
          WHERE v.id = u.variant_id AND v.seller_id = ?`,
        [writes.map((w) => w.target.variant_id), writes.map((w) => w.row.priceIqd!), sellerId],
      );
    } catch (err) {
      log.error('inventory price write failed', {
        seller_id: sellerId,
        error: err instanceof Error ? err.message : String(err),
      });
      for (const { row } of pricable) {
        if (results[row.index].status === 'accepted') {
          results[row.index] = rejected(
            row.sku,
            'internal_error',
            'The price could not be written after the stock was; retry the row.',
          );
        }
      }
    }
  }
  return results;
}
