import { mapLimited } from '../lib/concurrency';
import { isStorableText } from '../lib/text';
import type { Db } from '../db/knex';
import { newId } from '../lib/ids';
import { log } from '../lib/log';
import { defaultVariantOptions } from '../ops/products';
import { productHandle } from '../ops/handles';
import { accepted, isObject, isWholeNumber, rejected, rowSku, RowResult, SKU_REQUIRED } from './rows';

/** Rows of one bulk request that write at once (each in its own transaction). */
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
 * results in request order. Rows run concurrently, except that rows repeating a SKU run one after
 * another in request order (the first may create, the later ones then update).
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
  await mapLimited(lanesBySku(rows), ROW_CONCURRENCY, async (lane) => {
    for (const i of lane) {
      const row = rows[i];
      if (!('sku' in row)) {
        results[i] = row;
        continue;
      }
      try {
        results[i] = await upsertRow(ctx, row);
      } catch (err) {
        log.error('bulk upsert row failed', {
          seller_id: sellerId,
          error: err instanceof Error ? err.message : String(err),
        });
        results[i] = rejected(row.sku, 'internal_error', 'The row could not be written; retry it.');
      }
    }
  });
  return results;
}
