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

/** The last row per SKU among `rows` (a later row wins), sorted by SKU so that writes lock in one order. */
function lastPerSku(rows: InventoryRow[]): InventoryRow[] {
  return [...new Map(rows.map((r) => [r.sku, r])).entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([, r]) => r);
}

/** What one pass read: each SKU's variant and the seller's primary location. */
interface Snapshot {
  targets: Map<string, Target>;
  locationId: string | null;
}

/**
 * One statement: reads the variants of the SKUs and the primary location, writes `stock` (absolute
 * levels there) and `prices` (list prices of single-variant products; a row with on_hand is priced
 * only when the seller has a location, as its stock was then accepted; the last such row per SKU
 * wins). Rows whose SKU has no variant are skipped by the joins. Statement-level atomic: a failure
 * writes nothing.
 */
async function applyBatch(
  db: Db,
  sellerId: string,
  skus: string[],
  stock: InventoryRow[],
  prices: InventoryRow[],
): Promise<Snapshot> {
  const { rows } = await db.raw(
    `WITH loc AS (
       SELECT id FROM stock_locations WHERE seller_id = ? ORDER BY position LIMIT 1
     ), t AS (
       SELECT DISTINCT ON (v.sku) v.sku, v.id AS variant_id,
              (SELECT count(*) FROM variants o WHERE o.product_id = v.product_id AND o.seller_id = v.seller_id)::int
                AS variant_count
         FROM variants v
        WHERE v.seller_id = ? AND v.sku = ANY(?::text[])
        ORDER BY v.sku, v.product_id, v.id
     ), stock AS (
       INSERT INTO stock_levels (variant_id, location_id, level, updated_at)
       SELECT t.variant_id, loc.id, u.level, now()
         FROM unnest(?::text[], ?::numeric[]) AS u(sku, level) JOIN t USING (sku) CROSS JOIN loc
        ORDER BY t.variant_id
       ON CONFLICT (variant_id, location_id) DO UPDATE SET level = EXCLUDED.level, updated_at = EXCLUDED.updated_at
     ), price AS (
       -- During a markdown campaign the sale price is recomputed from the new list price.
       UPDATE variants v
          SET price = p.price,
              sale_price = CASE WHEN v.campaign_percent IS NULL THEN v.sale_price
                                ELSE round(p.price * (100 - v.campaign_percent)::numeric / 100) END,
              updated_at = now()
         FROM (SELECT DISTINCT ON (u.sku) t.variant_id, u.price
                 FROM unnest(?::text[], ?::bigint[], ?::boolean[]) WITH ORDINALITY
                        AS u(sku, price, with_stock, n)
                 JOIN t USING (sku)
                WHERE t.variant_count = 1 AND (NOT u.with_stock OR EXISTS (SELECT 1 FROM loc))
                ORDER BY u.sku, u.n DESC) p
        WHERE v.id = p.variant_id AND v.seller_id = ?
     )
     SELECT t.sku, t.variant_id, t.variant_count, (SELECT id FROM loc) AS location_id FROM t`,
    [
      sellerId,
      sellerId,
      skus,
      stock.map((r) => r.sku),
      stock.map((r) => r.onHand!),
      prices.map((r) => r.sku),
      prices.map((r) => r.priceIqd!),
      prices.map((r) => r.onHand !== undefined),
      sellerId,
    ],
  );
  return {
    targets: new Map(rows.map((t: Target & { sku: string }) => [t.sku, t])),
    locationId: rows[0]?.location_id ?? null,
  };
}

/** The rows' results from what was read, and which writes failed. */
function rowResults(
  rows: InventoryRow[],
  results: RowResult[],
  { targets, locationId }: Snapshot,
  failed: { stock: boolean; price: boolean },
): void {
  for (const row of rows) {
    const target = targets.get(row.sku);
    if (!target) {
      results[row.index] = rejected(row.sku, 'product_not_found', `No product has SKU ${row.sku}.`);
    } else if (row.onHand !== undefined && !locationId) {
      results[row.index] = rejected(
        row.sku,
        'inventory_item_not_found',
        'The seller has no stock location for on_hand.',
      );
    } else if (row.onHand !== undefined && failed.stock) {
      results[row.index] = rejected(row.sku, 'internal_error', 'Stock could not be written; retry the row.');
    } else if (row.priceIqd !== undefined && target.variant_count > 1) {
      results[row.index] = rejected(
        row.sku,
        'product_has_multiple_variants',
        'price_iqd applies to single-variant products only.',
      );
    } else if (row.priceIqd !== undefined && failed.price) {
      results[row.index] = rejected(
        row.sku,
        'internal_error',
        'The price could not be written after the stock was; retry the row.',
      );
    } else {
      results[row.index] = accepted(row.sku);
    }
  }
}

/**
 * `PATCH /inventory/bulk`: absolute stock at the primary location and list prices, read and
 * written in one statement for the whole batch (one round trip, one commit). Should that fail, the
 * batch is redone in three steps, so that a failed price write keeps the stock written and fails
 * only its own rows: the reads, then the stock, then the prices. Results in request order; no audit
 * entries.
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

  const skus = [...new Set(rows.map((r) => r.sku))];
  const stock = lastPerSku(rows.filter((r) => r.onHand !== undefined));
  const priced = rows.filter((r) => r.priceIqd !== undefined);
  const failed = { stock: false, price: false };
  const logFailure = (what: string, err: unknown) =>
    log.error(`inventory ${what} write failed`, {
      seller_id: sellerId,
      error: err instanceof Error ? err.message : String(err),
    });
  let snapshot: Snapshot;
  try {
    snapshot = await applyBatch(db, sellerId, skus, stock, priced);
  } catch (err) {
    logFailure('batch', err);
    snapshot = await applyBatch(db, sellerId, skus, [], []);
    if (stock.length > 0) {
      try {
        await applyBatch(db, sellerId, [...new Set(stock.map((r) => r.sku))], stock, []);
      } catch (stockErr) {
        logFailure('stock', stockErr);
        failed.stock = true;
      }
    }
    // Rows whose stock failed are not priced.
    const pricable = failed.stock ? priced.filter((r) => r.onHand === undefined) : priced;
    if (pricable.length > 0) {
      try {
        await applyBatch(db, sellerId, [...new Set(pricable.map((r) => r.sku))], [], pricable);
      } catch (priceErr) {
        logFailure('price', priceErr);
        failed.price = true;
      }
    }
  }
  rowResults(rows, results, snapshot, failed);
  return results;
}
