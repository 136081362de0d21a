import { Db, preparedQuery } from '../db/knex';
import { log } from '../lib/log';
import { accepted, isObject, isWholeNumber, rejected, rowSku, RowResult, SKU_REQUIRED } from './rows';

interface InventoryRow {
  index: number;
  sku: string;
  onHand?: number;
  priceIqd?: number;
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

/** What one pass read: the SKUs with no variant, the multi-variant SKUs asked to be priced, the primary location. */
interface Snapshot {
  missing: Set<string>;
  multiVariant: Set<string>;
  locationId: string | null;
}

/**
 * Per SKU: the last `on_hand` asked for, and the last `price_iqd`, from any row (used when the
 * seller has a stock location) or from rows without `on_hand` (used when not: a row with `on_hand`
 * is then refused, and so is its price). In no particular order: the statement picks each SKU's
 * variant after sorting by SKU itself, and writes stock levels in variant order.
 */
function perSku(rows: InventoryRow[]) {
  const bySku = new Map<string, { level: number | null; priceAny: number | null; priceAlone: number | null }>();
  for (const row of rows) {
    const entry = bySku.get(row.sku) ?? { level: null, priceAny: null, priceAlone: null };
    if (row.onHand !== undefined) entry.level = row.onHand;
    if (row.priceIqd !== undefined) {
      entry.priceAny = row.priceIqd;
      if (row.onHand === undefined) entry.priceAlone = row.priceIqd;
    }
    bySku.set(row.sku, entry);
  }
  const skus = [...bySku.keys()];
  const entries = [...bySku.values()];
  return {
    skus,
    levels: entries.map((e) => e.level),
    pricesAny: entries.map((e) => e.priceAny),
    pricesAlone: entries.map((e) => e.priceAlone),
  };
}

/**
 * One statement: reads the variants of the rows' SKUs and the seller's primary location, and, as
 * `write` says, writes absolute stock levels there and list prices of single-variant products.
 * SKUs with no variant are skipped by the joins. Statement-level atomic: a failure writes nothing.
 */
async function applyBatch(
  db: Db,
  sellerId: string,
  rows: InventoryRow[],
  write: { stock: boolean; price: boolean },
): Promise<Snapshot> {
  const { skus, levels, pricesAny, pricesAlone } = perSku(rows);
  const [{ location_id, missing, multi }] = await preparedQuery<{
    location_id: string | null;
    missing: string[];
    multi: string[];
  }>(
    db,
    'partner_inventory_bulk',
    `WITH loc AS (
       SELECT id FROM stock_locations WHERE seller_id = $1 ORDER BY position LIMIT 1
     ), u AS (
       SELECT * FROM unnest($2::text[], $3::numeric[], $4::bigint[], $5::bigint[]) AS u(sku, level, price_any, price_alone)
     ), t AS (
       SELECT DISTINCT ON (u.sku) u.sku, v.id AS variant_id, u.level,
              CASE WHEN EXISTS (SELECT 1 FROM loc) THEN u.price_any ELSE u.price_alone END AS price,
              u.price_any IS NOT NULL AND v.variant_count > 1 AS multi
         FROM u JOIN variants v ON v.seller_id = $1 AND v.sku = u.sku
        ORDER BY u.sku, v.product_id, v.id
     ), stock AS (
       INSERT INTO stock_levels (variant_id, location_id, level, updated_at)
       SELECT t.variant_id, loc.id, t.level, now()
         FROM t CROSS JOIN loc
        WHERE $6::boolean AND t.level IS NOT NULL
        ORDER BY t.variant_id
       ON CONFLICT (variant_id, location_id) DO UPDATE SET level = EXCLUDED.level, updated_at = EXCLUDED.updated_at
     ), price AS (
       -- During a markdown campaign the sale price is recomputed from the new list price.
       UPDATE variants v
          SET price = t.price,
              sale_price = CASE WHEN v.campaign_percent IS NULL THEN v.sale_price
                                ELSE round(t.price * (100 - v.campaign_percent)::numeric / 100) END,
              updated_at = now()
         FROM t
        WHERE $7::boolean AND v.id = t.variant_id AND v.seller_id = $1 AND t.price IS NOT NULL AND NOT t.multi
     )
     SELECT (SELECT id FROM loc) AS location_id,
            ARRAY(SELECT u.sku FROM u WHERE NOT EXISTS (SELECT 1 FROM t WHERE t.sku = u.sku)) AS missing,
            ARRAY(SELECT t.sku FROM t WHERE t.multi) AS multi`,
    [sellerId, skus, levels, pricesAny, pricesAlone, write.stock, write.price],
  );
  return { missing: new Set(missing), multiVariant: new Set(multi), locationId: location_id };
}

/** The rows' results from what was read, and which writes failed. */
function rowResults(
  rows: InventoryRow[],
  results: RowResult[],
  { missing, multiVariant, locationId }: Snapshot,
  failed: { stock: boolean; price: boolean },
): void {
  for (const row of rows) {
    if (missing.has(row.sku)) {
      results[row.index] = rejected(row.sku, 'product_not_found', `No product has SKU ${row.sku}.`);
    } else if (row.onHand !== undefined && !locationId) {
      results[row.index] = rejected(
        row.sku,
        'inventory_item_not_found',
        'The seller has no stock location for on_hand.',
      );
    } else if (row.onHand !== undefined && failed.stock) {
      results[row.index] = rejected(row.sku, 'internal_error', 'Stock could not be written; retry the row.');
    } else if (row.priceIqd !== undefined && multiVariant.has(row.sku)) {
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
 * entries. Runs in `db`'s transaction when it is one (then all or nothing, without the retry).
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

  const failed = { stock: false, price: false };
  const logFailure = (what: string, err: unknown) =>
    log.error(`inventory ${what} write failed`, {
      seller_id: sellerId,
      error: err,
    });
  let snapshot: Snapshot;
  try {
    snapshot = await applyBatch(db, sellerId, rows, { stock: true, price: true });
  } catch (err) {
    logFailure('batch', err);
    // In a caller's transaction (the console's guarded write) the failure aborted it: no retry there.
    if (db.isTransaction) throw err;
    snapshot = await applyBatch(db, sellerId, rows, { stock: false, price: false });
    const stocked = rows.filter((r) => r.onHand !== undefined);
    if (stocked.length > 0) {
      try {
        await applyBatch(db, sellerId, stocked, { stock: true, price: false });
      } catch (stockErr) {
        logFailure('stock', stockErr);
        failed.stock = true;
      }
    }
    // Rows whose stock failed are not priced.
    const pricable = rows.filter((r) => r.priceIqd !== undefined && !(failed.stock && r.onHand !== undefined));
    if (pricable.length > 0) {
      try {
        await applyBatch(db, sellerId, pricable, { stock: false, price: true });
      } catch (priceErr) {
        logFailure('price', priceErr);
        failed.price = true;
      }
    }
  }
  rowResults(rows, results, snapshot, failed);
  return results;
}
