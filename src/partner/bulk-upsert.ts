import type { Db } from '../db/knex';
import { newId } from '../lib/ids';
import { log } from '../lib/log';
import { defaultVariantOptions } from '../ops/products';
import { productHandle } from '../ops/handles';
import { accepted, isObject, isWholeNumber, mapLimited, rejected, rowSku, RowResult } from './rows';

/** Rows of one bulk request that write at once (each in its own transaction). */
const ROW_CONCURRENCY = 4;

interface UpsertRow {
  sku: string;
  title?: string;
  priceIqd?: number;
  description?: string;
  categoryIds?: string[];
  initialStock?: number;
}

interface Existing {
  product_id: string;
  catalog_managed: boolean;
}

interface Context {
  db: Db;
  sellerId: string;
  existing: Map<string, Existing>;
  categories: Map<string, { catalog_only: boolean }>;
  primaryLocationId: string | null;
}

/** Reads a row, dropping optional fields of the wrong JSON type; a string result is a refusal. */
function readRow(raw: unknown): UpsertRow | RowResult {
  if (!isObject(raw)) return rejected(null, 'validation_error', 'The row is not an object.');
  const sku = rowSku(raw);
  if (sku === null) return rejected(null, 'validation_error', 'external_sku is required and must not be blank.');
  const row: UpsertRow = { sku };
  if (typeof raw.title === 'string') row.title = raw.title;
  if (typeof raw.price_iqd === 'number' && Number.isSafeInteger(raw.price_iqd)) row.priceIqd = raw.price_iqd;
  if (typeof raw.description === 'string') row.description = raw.description;
  if (Array.isArray(raw.category_ids) && raw.category_ids.every((c) => typeof c === 'string')) {
    row.categoryIds = [...new Set(raw.category_ids as string[])];
  }
  if (typeof raw.initial_stock === 'number' && Number.isSafeInteger(raw.initial_stock)) row.initialStock = raw.initial_stock;
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

async function replaceCategories(trx: Db, productId: string, categoryIds: string[]): Promise<void> {
  await trx('product_categories').where({ product_id: productId }).delete();
  if (categoryIds.length > 0) {
    await trx('product_categories').insert(categoryIds.map((category_id, position) => ({ product_id: productId, category_id, position })));
  }
}

/** Update: only title, description and category_ids; a published product goes back to proposed. */
async function updateRow(ctx: Context, row: UpsertRow, existing: Existing): Promise<RowResult> {
  if (existing.catalog_managed) {
    return rejected(row.sku, 'catalog_product_locked', 'This catalog product cannot be changed through the API.');
  }
  if (row.title !== undefined && row.title.trim() === '') return rejected(row.sku, 'validation_error', 'title must not be blank.');
  const refusal = checkCategories(ctx, row);
  if (refusal) return refusal;
  await ctx.db.transaction(async (trx) => {
    await trx('products')
      .where({ id: existing.product_id, seller_id: ctx.sellerId })
      .update({
        ...(row.title !== undefined ? { title: row.title } : {}),
        ...(row.description !== undefined ? { description: row.description } : {}),
        status: trx.raw(`CASE WHEN status = 'published' THEN 'proposed' ELSE status END`),
        updated_at: trx.fn.now(),
      });
    if (row.categoryIds !== undefined) await replaceCategories(trx, existing.product_id, row.categoryIds);
  });
  return accepted(row.sku, { product_id: existing.product_id });
}

/** Create: a draft product with one Default variant, its price, and initial stock at the first location. */
async function createRow(ctx: Context, row: UpsertRow): Promise<RowResult> {
  if (row.title === undefined || row.title.trim() === '') {
    return rejected(row.sku, 'validation_error', 'title is required to create a product.');
  }
  if (row.priceIqd === undefined) return rejected(row.sku, 'validation_error', 'price_iqd is required to create a product.');
  if (row.priceIqd < 0) return rejected(row.sku, 'validation_error', 'price_iqd must be 0 or more.');
  if (row.initialStock !== undefined && !isWholeNumber(row.initialStock)) {
    return rejected(row.sku, 'validation_error', 'initial_stock must be a whole number 0 or more.');
  }
  const initialStock = row.initialStock ?? 0;
  if (initialStock > 0 && ctx.primaryLocationId === null) {
    return rejected(row.sku, 'inventory_item_not_found', 'The seller has no stock location for initial_stock.');
  }
  const refusal = checkCategories(ctx, row);
  if (refusal) return refusal;

  const productId = newId('prod');
  const variantId = newId('var');
  await ctx.db.transaction(async (trx) => {
    await trx('products').insert({
      id: productId,
      seller_id: ctx.sellerId,
      title: row.title,
      handle: productHandle(row.title!),
      status: 'draft',
      description: row.description ?? '',
    });
    await trx('variants').insert({
      id: variantId,
      offer_id: newId('off'),
      product_id: productId,
      seller_id: ctx.sellerId,
      sku: row.sku,
      options: JSON.stringify(defaultVariantOptions),
      price: row.priceIqd,
    });
    if (ctx.primaryLocationId !== null) {
      await trx('stock_levels').insert({ variant_id: variantId, location_id: ctx.primaryLocationId, level: initialStock });
    }
    if (row.categoryIds?.length) await replaceCategories(trx, productId, row.categoryIds);
  });
  return accepted(row.sku, { product_id: productId });
}

/**
 * `POST /products/bulk`: creates or updates each row by SKU; every row problem is a rejected row,
 * results in request order. Lookups for the whole batch are done once up front.
 */
export async function bulkUpsertProducts(db: Db, sellerId: string, items: unknown[]): Promise<RowResult[]> {
  const rows = items.map(readRow);
  const valid = rows.filter((r): r is UpsertRow => 'sku' in r);
  const skus = [...new Set(valid.map((r) => r.sku))];
  const categoryIds = [...new Set(valid.flatMap((r) => r.categoryIds ?? []))];

  const [existingRows, categoryRows, location] = await Promise.all([
    db.raw(
      `SELECT DISTINCT ON (v.sku) v.sku, p.id AS product_id, p.catalog_managed
         FROM variants v JOIN products p ON p.id = v.product_id
        WHERE v.seller_id = ? AND v.sku = ANY(?)
        ORDER BY v.sku, p.id`,
      [sellerId, skus],
    ),
    categoryIds.length > 0 ? db('categories').whereIn('id', categoryIds).select('id', 'catalog_only') : [],
    db('stock_locations').where({ seller_id: sellerId }).orderBy('position').first('id'),
  ]);
  const ctx: Context = {
    db,
    sellerId,
    existing: new Map(existingRows.rows.map((r: Existing & { sku: string }) => [r.sku, r])),
    categories: new Map((categoryRows as Array<{ id: string; catalog_only: boolean }>).map((c) => [c.id, c])),
    primaryLocationId: location?.id ?? null,
  };

  return mapLimited(rows, ROW_CONCURRENCY, async (row) => {
    if (!('sku' in row)) return row;
    const existing = ctx.existing.get(row.sku);
    try {
      return existing ? await updateRow(ctx, row, existing) : await createRow(ctx, row);
    } catch (err) {
      log.error('bulk upsert row failed', { seller_id: sellerId, error: err instanceof Error ? err.message : String(err) });
      return rejected(row.sku, 'internal_error', 'The row could not be written; retry it.');
    }
  });
}
