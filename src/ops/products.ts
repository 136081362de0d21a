import type { Db } from '../db/knex';
import { newId } from '../lib/ids';
import { money, nonBlank } from './checks';
import { OpsError } from './errors';
import { productHandle } from './handles';
import { primaryLocationId, requireSeller } from './lookups';

export type ProductStatus = 'draft' | 'proposed' | 'published' | 'rejected';

/** The options of a product's only variant when the product has no real options. */
export const defaultVariantOptions: Readonly<Record<string, string>> = { Default: 'Default' };

export interface VariantIn {
  sku: string;
  price: number;
  options?: Record<string, string>;
}

export interface VariantOut {
  variant_id: string;
  offer_id: string;
  product_id: string;
  sku: string;
  options: Record<string, string>;
  price: number;
}

export interface ProductIn {
  sellerId: string;
  title: string;
  status: ProductStatus;
  catalogManaged: boolean;
  description?: string;
  categoryIds?: string[];
  variants: VariantIn[];
}

export interface ProductOut {
  product_id: string;
  seller_id: string;
  title: string;
  handle: string;
  status: ProductStatus;
  catalog_managed: boolean;
  category_ids: string[];
  variants: VariantOut[];
}

/** Inserts a variant and, when the seller has a stock location, its stock record (level 0) at the primary one. */
async function insertVariant(db: Db, productId: string, sellerId: string, input: VariantIn): Promise<VariantOut> {
  const variant = {
    variant_id: newId('var'),
    offer_id: newId('off'),
    product_id: productId,
    sku: nonBlank(input.sku, 'sku'),
    options: input.options ?? { ...defaultVariantOptions },
    price: money(input.price, 'price'),
  };
  await db('variants').insert({
    id: variant.variant_id,
    offer_id: variant.offer_id,
    product_id: productId,
    seller_id: sellerId,
    sku: variant.sku,
    options: JSON.stringify(variant.options),
    price: variant.price,
  });
  const locationId = await primaryLocationId(db, sellerId);
  if (locationId)
    await db('stock_levels').insert({ variant_id: variant.variant_id, location_id: locationId, level: 0 });
  return variant;
}

/** Throws `category_not_found` naming the first id that is not a category. */
async function requireCategories(db: Db, ids: string[]): Promise<void> {
  const found = new Set((await db('categories').whereIn('id', ids).pluck('id')) as string[]);
  const missing = ids.find((id) => !found.has(id));
  if (missing) throw new OpsError('category_not_found', `no category ${missing}`);
}

/** Creates a product with its variants (each with a stock record at the seller's primary location). */
export async function createProduct(db: Db, input: ProductIn): Promise<ProductOut> {
  const title = nonBlank(input.title, 'title');
  const categoryIds = [...new Set(input.categoryIds ?? [])];
  if (input.variants.length === 0) throw new OpsError('invalid_variants', 'a product needs at least one variant');
  await requireSeller(db, input.sellerId);
  await requireCategories(db, categoryIds);
  const product = { id: newId('prod'), handle: productHandle(title) };
  const variants = await db.transaction(async (trx) => {
    await trx('products').insert({
      id: product.id,
      seller_id: input.sellerId,
      title,
      handle: product.handle,
      status: input.status,
      description: input.description ?? '',
      catalog_managed: input.catalogManaged,
    });
    if (categoryIds.length > 0) {
      await trx('product_categories').insert(
        categoryIds.map((categoryId, position) => ({ product_id: product.id, category_id: categoryId, position })),
      );
    }
    const out: VariantOut[] = [];
    for (const v of input.variants) out.push(await insertVariant(trx, product.id, input.sellerId, v));
    return out;
  });
  return {
    product_id: product.id,
    seller_id: input.sellerId,
    title,
    handle: product.handle,
    status: input.status,
    catalog_managed: input.catalogManaged,
    category_ids: categoryIds,
    variants,
  };
}

/** Creates a catalog-managed product, published (the catalog team's product needs no review), with one Default variant. */
export async function createCatalogProduct(
  db: Db,
  input: { sellerId: string; sku: string; title: string; price: number; description?: string; categoryIds?: string[] },
): Promise<ProductOut> {
  return createProduct(db, {
    sellerId: input.sellerId,
    title: input.title,
    status: 'published',
    catalogManaged: true,
    description: input.description,
    categoryIds: input.categoryIds,
    variants: [{ sku: input.sku, price: input.price }],
  });
}

/** Adds a variant to an existing product of any status; `options` maps option name to value (none: `{}`). */
export async function addVariant(
  db: Db,
  input: { productId: string; sku: string; price: number; options?: Record<string, string> },
): Promise<VariantOut> {
  const product = await db('products').where({ id: input.productId }).first('id', 'seller_id');
  if (!product) throw new OpsError('product_not_found', `no product ${input.productId}`);
  for (const [name, value] of Object.entries(input.options ?? {})) {
    nonBlank(name, 'option');
    nonBlank(value, 'option');
  }
  const variant = { sku: input.sku, price: input.price, options: input.options ?? {} };
  return db.transaction((trx) => insertVariant(trx, product.id, product.seller_id, variant));
}
