import { mapLimited } from '../lib/concurrency';
import { isStorableText } from '../lib/text';
import type { Db } from '../db/knex';
import { newId } from '../lib/ids';
import { log } from '../lib/log';
import { defaultVariantOptions } from '../ops/products';
import { productHandle } from '../ops/handles';
import { accepted, isObject, isWholeNumber, rejected, rowSku, RowResult, SKU_REQUIRED } from './rows';

/** Rows of one bulk request written at once when they go row by row (each in its own transaction). */
const ROW_CONCURRENCY = 4;

/** Advisory-lock namespace of "creating or updating the seller's product for one SKU". */
const SKU_LOCK_NAMESPACE = 0x5053_4b55;

interface UpsertRow {
  sku: string;
  title?: string;
  /** Any JSON number; checked on create only (it is ignored on update). */
  priceIqd?: number;
  description?: string;
  categoryIds?: string[];
  /** Any JSON number; checked on create only (it is ignored on update). */
  initialStock?: number;
}

interface Existing {
  product_id: string;
  catalog_managed: boolean;
}

interface Context {
  db: Db;
  sellerId: string;
  categories: Map<string, { catalog_only: boolean }>;
  primaryLocationId: string | null;
}

/** Reads a row, dropping optional fields of the wrong JSON type; a RowResult is a refusal. */
function readRow(raw: unknown): UpsertRow | RowResult {
  if (!isObject(raw)) return rejected(null, 'validation_error', 'The row is not an object.');
  const sku = rowSku(raw);
  if (sku === null) return rejected(null, 'validation_error', SKU_REQUIRED);
  const row: UpsertRow = { sku };
  if (typeof raw.title === 'string') row.title = raw.title;
  if (typeof raw.price_iqd === 'number') row.priceIqd = raw.price_iqd;
  if (typeof raw.description === 'string') row.description = raw.description;
  if (Array.isArray(raw.category_ids) && raw.category_ids.every((c) => typeof c === 'string')) {
    // Messages name unknown categories, so an id Postgres cannot hold is refused without echoing it.
    if (!raw.category_ids.every(isStorableText)) {
      return rejected(sku, 'validation_error', 'category_ids must be valid Unicode without U+0000.');
    }
    row.categoryIds = [...new Set(raw.category_ids as string[])];
  }
  if (typeof raw.initial_stock === 'number') row.initialStock = raw.initial_stock;
  for (const [field, value] of [
    ['title', row.title],
    ['description', row.description],
  ] as const) {
    if (value !== undefined && !isStorableText(value))
      return rejected(sku, 'validation_error', `${field} must be valid Unicode without U+0000.`);
  }
  return row;
}

/** A refusal for the row's categories, or null when every category exists and accepts seller products. */
function checkCategories(ctx: Context, row: UpsertRow): RowResult | null {
  for (const id of row.categoryIds ?? []) {
    const category = ctx.categories.get(id);
    if (!category) return rejected(row.sku, 'validation_error', `category_ids: ${id} is not a category.`);
    if (category.catalog_only) {
      return rejected(row.sku, 'catalog_only_category', `Category ${id} accepts only catalog products.`);
    }
  }
  return null;
}

/** A refusal of a create row before anything is written, or null. */
function checkCreate(ctx: Context, row: UpsertRow): RowResult | null {
  if (row.title === undefined || row.title.trim() === '') {
    return rejected(row.sku, 'validation_error', 'title is required to create a product.');
  }
  if (row.priceIqd === undefined)
    return rejected(row.sku, 'validation_error', 'price_iqd is required to create a product.');
  if (!isWholeNumber(row.priceIqd)) {
    return rejected(row.sku, 'validation_error', 'price_iqd must be a whole number of dinars, 0 or more.');
  }
  if (row.initialStock !== undefined && !isWholeNumber(row.initialStock)) {
    return rejected(row.sku, 'validation_error', 'initial_stock must be a whole number 0 or more.');
  }
  if ((row.initialStock ?? 0) > 0 && ctx.primaryLocationId === null) {
    return rejected(row.sku, 'inventory_item_not_found', 'The seller has no stock location for initial_stock.');
  }
  return checkCategories(ctx, row);
}

/** A refusal of an update row before anything is written, or null. */
function checkUpdate(ctx: Context, row: UpsertRow, existing: Existing): RowResult | null {
  if (existing.catalog_managed) {
    return rejected(row.sku, 'catalog_product_locked', 'This catalog product cannot be changed through the API.');
  }
  if (row.title !== undefined && row.title.trim() === '') {
    return rejected(row.sku, 'validation_error', 'title must not be blank.');
  }
  return checkCategories(ctx, row);
}

/** A valid row: its place in the request and what it asked. */
interface Placed {
  index: number;
  row: UpsertRow;
}

/** The columns of one batch write: products updated, products created, categories set. */
class BatchWrite {
  updates = { ids: [] as string[], titles: [] as Array<string | null>, descriptions: [] as Array<string | null> };
  creates = {
    productIds: [] as string[],
    variantIds: [] as string[],
    offerIds: [] as string[],
    skus: [] as string[],
    titles: [] as string[],
    handles: [] as string[],
    descriptions: [] as string[],
    prices: [] as number[],
    stock: [] as number[],
  };
  /** Products whose categories are replaced, and their new (product, category, position) rows. */
  recategorised: string[] = [];
  categories = { productIds: [] as string[], categoryIds: [] as string[], positions: [] as number[] };

  update(productId: string, row: UpsertRow): void {
    this.updates.ids.push(productId);
    this.updates.titles.push(row.title ?? null);
    this.updates.descriptions.push(row.description ?? null);
    if (row.categoryIds !== undefined) this.setCategories(productId, row.categoryIds);
  }

  create(row: UpsertRow): string {
    const productId = newId('prod');
    const c = this.creates;
    c.productIds.push(productId);
    c.variantIds.push(newId('var'));
    c.offerIds.push(newId('off'));
    c.skus.push(row.sku);
    c.titles.push(row.title!);
    c.handles.push(productHandle(row.title!));
    c.descriptions.push(row.description ?? '');
    c.prices.push(row.priceIqd!);
    c.stock.push(row.initialStock ?? 0);
    this.setCategories(productId, row.categoryIds ?? []);
    return productId;
  }

  private setCategories(productId: string, categoryIds: string[]): void {
    this.recategorised.push(productId);
    categoryIds.forEach((categoryId, position) => {
      this.categories.productIds.push(productId);
      this.categories.categoryIds.push(categoryId);
      this.categories.positions.push(position);
    });
  }

  /**
   * One statement: the updates (only title, description; a published product back to proposed),
   * the new products with their Default variant and stock at the primary location, and the
   * categories of every product given some (rows no longer listed deleted, the listed upserted
   * with their positions, so the two never touch the same row).
   */
  async write(trx: Db, ctx: Context): Promise<void> {
    const { updates: u, creates: c, categories: k } = this;
    await trx.raw(
      `WITH upd AS (
         UPDATE products p
            SET title = COALESCE(u.title, p.title), description = COALESCE(u.description, p.description),
                status = CASE WHEN p.status = 'published' THEN 'proposed' ELSE p.status END, updated_at = now()
           FROM unnest(?::text[], ?::text[], ?::text[]) AS u(id, title, description)
          WHERE p.id = u.id AND p.seller_id = ?
       ), np AS (
         INSERT INTO products (id, seller_id, title, handle, status, description)
         SELECT n.id, ?, n.title, n.handle, 'draft', n.description
           FROM unnest(?::text[], ?::text[], ?::text[], ?::text[]) AS n(id, title, handle, description)
       ), nv AS (
         INSERT INTO variants (id, offer_id, product_id, seller_id, sku, options, price)
         SELECT n.variant_id, n.offer_id, n.product_id, ?, n.sku, ?::jsonb, n.price
           FROM unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[]) AS n(variant_id, offer_id, product_id, sku, price)
       ), ns AS (
         INSERT INTO stock_levels (variant_id, location_id, level)
         SELECT n.variant_id, ?::text, n.level FROM unnest(?::text[], ?::numeric[]) AS n(variant_id, level)
          WHERE ?::text IS NOT NULL
       ), gone AS (
         DELETE FROM product_categories pc
          WHERE pc.product_id = ANY(?::text[])
            AND (pc.product_id, pc.category_id) NOT IN (SELECT * FROM unnest(?::text[], ?::text[]))
       )
       INSERT INTO product_categories (product_id, category_id, position)
       SELECT * FROM unnest(?::text[], ?::text[], ?::int[])
       ON CONFLICT (product_id, category_id) DO UPDATE SET position = EXCLUDED.position`,
      [
        u.ids,
        u.titles as string[],
        u.descriptions as string[],
        ctx.sellerId,
        ctx.sellerId,
        c.productIds,
        c.titles,
        c.handles,
        c.descriptions,
        ctx.sellerId,
        JSON.stringify(defaultVariantOptions),
        c.variantIds,
        c.offerIds,
        c.productIds,
        c.skus,
        c.prices,
        ctx.primaryLocationId,
        c.variantIds,
        c.stock,
        ctx.primaryLocationId,
        this.recategorised,
        k.productIds,
        k.categoryIds,
        k.productIds,
        k.categoryIds,
        k.positions,
      ],
    );
  }
}

/**
 * Rows of distinct SKUs in one transaction: every SKU locked (in lock-key order, so two requests
 * cannot deadlock) and looked up under the locks, so two requests creating the same new SKU at
 * once make one product (the second becomes an update); each row checked; then all of them
 * written in one statement. When the SKU is on several products, the oldest is the one updated
 * (as `GET /products/{sku}`). Returns each row's result by request index; throws (writing
 * nothing) when the database fails on any row.
 */
async function upsertRows(ctx: Context, placed: Placed[]): Promise<Array<[number, RowResult]>> {
  const skus = placed.map((p) => p.row.sku);
  return ctx.db.transaction(async (trx) => {
    await trx.raw(
      `SELECT count(pg_advisory_xact_lock(?, k))
         FROM (SELECT DISTINCT hashtext(? || '/' || sku) AS k FROM unnest(?::text[]) AS sku ORDER BY 1) AS keys`,
      [SKU_LOCK_NAMESPACE, ctx.sellerId, skus],
    );
    const { rows: found } = await trx.raw(
      `SELECT DISTINCT ON (v.sku) v.sku, p.id AS product_id, p.catalog_managed
         FROM variants v JOIN products p ON p.id = v.product_id
        WHERE v.seller_id = ? AND v.sku = ANY(?::text[]) AND p.seller_id = ?
        ORDER BY v.sku, p.id`,
      [ctx.sellerId, skus, ctx.sellerId],
    );
    const existing = new Map<string, Existing>(found.map((f: Existing & { sku: string }) => [f.sku, f]));
    const write = new BatchWrite();
    const outcome = placed.map(({ index, row }): [number, RowResult] => {
      const current = existing.get(row.sku);
      if (current) {
        const refusal = checkUpdate(ctx, row, current);
        if (refusal) return [index, refusal];
        write.update(current.product_id, row);
        return [index, accepted(row.sku, { product_id: current.product_id })];
      }
      const refusal = checkCreate(ctx, row);
      return [index, refusal ?? accepted(row.sku, { product_id: write.create(row) })];
    });
    await write.write(trx, ctx);
    return outcome;
  });
}

/**
 * `POST /products/bulk`: creates or updates each row by SKU; every row problem is a rejected row,
 * results in request order. The rows whose SKU appears once are written together (`upsertRows`);
 * should the database fail on any of them, they are redone one transaction per row, so that only
 * the failing row is `internal_error`. Rows repeating a SKU run one after another in request order
 * (the first may create, the later ones then update), lanes of different SKUs concurrently.
 */
export async function bulkUpsertProducts(db: Db, sellerId: string, items: unknown[]): Promise<RowResult[]> {
  const rows = items.map(readRow);
  const categoryIds = [...new Set(rows.flatMap((r) => ('sku' in r ? (r.categoryIds ?? []) : [])))];
  const [categoryRows, location] = await Promise.all([
    categoryIds.length > 0 ? db('categories').whereIn('id', categoryIds).select('id', 'catalog_only') : [],
    db('stock_locations').where({ seller_id: sellerId }).orderBy('position').first('id'),
  ]);
  const ctx: Context = {
    db,
    sellerId,
    categories: new Map((categoryRows as Array<{ id: string; catalog_only: boolean }>).map((c) => [c.id, c])),
    primaryLocationId: location?.id ?? null,
  };

  const results = new Array<RowResult>(rows.length);
  // The valid rows by SKU, in request order; a refused row is its own result.
  const bySku = new Map<string, Placed[]>();
  rows.forEach((row, index) => {
    if (!('sku' in row)) results[index] = row;
    else {
      const lane = bySku.get(row.sku);
      if (lane) lane.push({ index, row });
      else bySku.set(row.sku, [{ index, row }]);
    }
  });

  /** Writes `placed` in one transaction; if that fails, several rows go again one by one, one row is `internal_error`. */
  const write = async (placed: Placed[]): Promise<void> => {
    try {
      for (const [index, result] of await upsertRows(ctx, placed)) results[index] = result;
    } catch (err) {
      if (placed.length > 1) {
        logFailure('bulk upsert batch failed', sellerId, err);
        await mapLimited(placed, ROW_CONCURRENCY, (p) => write([p]));
        return;
      }
      logFailure('bulk upsert row failed', sellerId, err);
      const [{ index, row }] = placed;
      results[index] = rejected(row.sku, 'internal_error', 'The row could not be written; retry it.');
    }
  };
  const lanes = [...bySku.values()];
  const single = lanes.filter((lane) => lane.length === 1).flat();
  const repeated = lanes.filter((lane) => lane.length > 1);
  await Promise.all([
    single.length > 0 && write(single),
    mapLimited(repeated, ROW_CONCURRENCY, async (lane) => {
      for (const p of lane) await write([p]);
    }),
  ]);
  return results;
}

function logFailure(message: string, sellerId: string, err: unknown): void {
  log.error(message, { seller_id: sellerId, error: err });
}
