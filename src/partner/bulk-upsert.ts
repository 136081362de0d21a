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

async function replaceCategories(trx: Db, productId: string, categoryIds: string[]): Promise<void> {
  await trx('product_categories').where({ product_id: productId }).delete();
  if (categoryIds.length > 0) {
    await trx('product_categories').insert(
      categoryIds.map((category_id, position) => ({ product_id: productId, category_id, position })),
    );
  }
}

/** Update: only title, description and category_ids; a published product goes back to proposed. */
async function updateProduct(trx: Db, sellerId: string, row: UpsertRow, productId: string): Promise<void> {
  await trx('products')
    .where({ id: productId, seller_id: sellerId })
    .update({
      ...(row.title !== undefined ? { title: row.title } : {}),
      ...(row.description !== undefined ? { description: row.description } : {}),
      status: trx.raw(`CASE WHEN status = 'published' THEN 'proposed' ELSE status END`),
      updated_at: trx.fn.now(),
    });
  if (row.categoryIds !== undefined) await replaceCategories(trx, productId, row.categoryIds);
}

/**
 * Create: a draft product with one Default variant, its price, initial stock at the first location
 * and its categories, in one statement.
 */
async function createProduct(trx: Db, ctx: Context, row: UpsertRow): Promise<string> {
  const productId = newId('prod');
  const variantId = newId('var');
  const categoryIds = row.categoryIds ?? [];
  await trx.raw(
    `WITH p AS (
       INSERT INTO products (id, seller_id, title, handle, status, description) VALUES (?, ?, ?, ?, 'draft', ?)
     ), v AS (
       INSERT INTO variants (id, offer_id, product_id, seller_id, sku, options, price) VALUES (?, ?, ?, ?, ?, ?, ?)
     ), s AS (
       INSERT INTO stock_levels (variant_id, location_id, level) SELECT ?, ?::text, ? WHERE ?::text IS NOT NULL
     )
     INSERT INTO product_categories (product_id, category_id, position)
     SELECT ?, c.id, c.n - 1 FROM unnest(?::text[]) WITH ORDINALITY AS c(id, n)`,
    [
      productId,
      ctx.sellerId,
      row.title!,
      productHandle(row.title!),
      row.description ?? '',
      variantId,
      newId('off'),
      productId,
      ctx.sellerId,
      row.sku,
      JSON.stringify(defaultVariantOptions),
      row.priceIqd!,
      variantId,
      ctx.primaryLocationId,
      row.initialStock ?? 0,
      ctx.primaryLocationId,
      productId,
      categoryIds,
    ],
  );
  return productId;
}

/**
 * One row in its own transaction. The SKU is locked first and looked up inside the lock, so two
 * requests creating the same new SKU at once make one product (the second becomes an update).
 * When the SKU is on several products, the oldest is the one updated (as `GET /products/{sku}`).
 */
async function upsertRow(ctx: Context, row: UpsertRow): Promise<RowResult> {
  return ctx.db.transaction(async (trx) => {
    await trx.raw('SELECT pg_advisory_xact_lock(?, hashtext(?))', [SKU_LOCK_NAMESPACE, `${ctx.sellerId}/${row.sku}`]);
    const existing: Existing | undefined = await trx('products as p')
      .join('variants as v', 'v.product_id', 'p.id')
      .where({ 'v.seller_id': ctx.sellerId, 'v.sku': row.sku, 'p.seller_id': ctx.sellerId })
      .orderBy('p.id')
      .first('p.id as product_id', 'p.catalog_managed');
    if (existing) {
      const refusal = checkUpdate(ctx, row, existing);
      if (refusal) return refusal;
      await updateProduct(trx, ctx.sellerId, row, existing.product_id);
      return accepted(row.sku, { product_id: existing.product_id });
    }
    const refusal = checkCreate(ctx, row);
    if (refusal) return refusal;
    return accepted(row.sku, { product_id: await createProduct(trx, ctx, row) });
  });
}

/** A row of the batch: its place in the request and what it asked. */
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
 * Rows whose SKUs appear once in the request, in one transaction: every SKU locked (in lock-key
 * order, so two batches cannot deadlock), looked up under the locks, each row checked as
 * `upsertRow` would, then all of them written in one statement. Throws (writing nothing) when the
 * database fails on any row.
 */
async function upsertBatch(ctx: Context, placed: Placed[], results: RowResult[]): Promise<void> {
  const skus = placed.map((p) => p.row.sku);
  const decided = await ctx.db.transaction(async (trx) => {
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
  for (const [index, result] of decided) results[index] = result;
}

/** Indexes of `rows` grouped by SKU (first occurrence order); refusals are groups of their own. */
function lanesBySku(rows: Array<UpsertRow | RowResult>): number[][] {
  const lanes = new Map<string, number[]>();
  rows.forEach((row, i) => {
    const key = 'sku' in row ? `sku:${row.sku}` : `row:${i}`;
    const lane = lanes.get(key);
    if (lane) lane.push(i);
    else lanes.set(key, [i]);
  });
  return [...lanes.values()];
}

/**
 * `POST /products/bulk`: creates or updates each row by SKU; every row problem is a rejected row,
 * results in request order. The rows whose SKU appears once are written together (`upsertBatch`);
 * should the database fail on any of them, they are redone one transaction per row, so that only
 * the failing row is `internal_error`. Rows repeating a SKU run one after another in request order
 * (the first may create, the later ones then update).
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
  const runLanes = (lanes: number[][]) =>
    mapLimited(lanes, ROW_CONCURRENCY, async (lane) => {
      for (const i of lane) {
        const row = rows[i];
        if (!('sku' in row)) {
          results[i] = row;
          continue;
        }
        try {
          results[i] = await upsertRow(ctx, row);
        } catch (err) {
          logFailure('bulk upsert row failed', sellerId, err);
          results[i] = rejected(row.sku, 'internal_error', 'The row could not be written; retry it.');
        }
      }
    });
  // A SKU given once goes into the batch; repeated SKUs run row by row, in request order.
  const lanes = lanesBySku(rows);
  const single = lanes.filter((lane) => lane.length === 1 && 'sku' in rows[lane[0]]);
  const placed = single.map(([index]) => ({ index, row: rows[index] as UpsertRow }));
  const others = lanes.filter((lane) => !(lane.length === 1 && 'sku' in rows[lane[0]]));
  await Promise.all([
    runLanes(others),
    placed.length > 0 &&
      upsertBatch(ctx, placed, results).catch((err) => {
        // The batch wrote nothing: row by row, a failing row fails alone.
        logFailure('bulk upsert batch failed', sellerId, err);
        return runLanes(single);
      }),
  ]);
  return results;
}

function logFailure(message: string, sellerId: string, err: unknown): void {
  log.error(message, { seller_id: sellerId, error: err instanceof Error ? err.message : String(err) });
}
