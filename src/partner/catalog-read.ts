import { isStorableText } from '../lib/text';
import { inSnapshot, type Db } from '../db/knex';

export interface ProductRow {
  id: string;
  title: string;
  handle: string;
  status: string;
  description: string;
  thumbnail: string | null;
  images: string[];
  brand: { id: string; name: string; slug: string } | null;
  catalog_managed: boolean;
  handling: string | null;
  rejection_reason: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface VariantRow {
  id: string;
  offer_id: string;
  product_id: string;
  sku: string;
  options: Record<string, string>;
  price: number;
  sale_price: number | null;
  campaign_label: string | null;
  condition: string | null;
  notes: string | null;
  stocked_quantity: number;
}

export interface ProductWithParts {
  product: ProductRow;
  variants: VariantRow[];
  categoryIds: string[];
}

/**
 * The seller's products `ids` with all of the seller's variants (each with its stock summed over
 * locations, each location's level rounded half away from zero) and category ids: three queries
 * whatever the page size, in the snapshot (`inSnapshot`) that read `products`.
 */
export async function loadProducts(db: Db, sellerId: string, products: ProductRow[]): Promise<ProductWithParts[]> {
  if (products.length === 0) return [];
  const ids = products.map((p) => p.id);
  const [variants, categories] = await Promise.all([
    db.raw<{ rows: VariantRow[] }>(
      `SELECT v.id, v.offer_id, v.product_id, v.sku, v.options, v.price, v.sale_price, v.campaign_label,
              v.condition, v.notes,
              COALESCE((SELECT SUM(ROUND(sl.level)) FROM stock_levels sl WHERE sl.variant_id = v.id), 0)::bigint
                AS stocked_quantity
         FROM variants v
        WHERE v.seller_id = ? AND v.product_id = ANY(?)
        ORDER BY v.product_id, v.created_at, v.id`,
      [sellerId, ids],
    ),
    db('product_categories')
      .whereIn('product_id', ids)
      .orderBy(['product_id', 'position'])
      .select('product_id', 'category_id'),
  ]);
  const variantsOf = groupBy(variants.rows, (v) => v.product_id);
  const categoriesOf = groupBy(categories as Array<{ product_id: string; category_id: string }>, (c) => c.product_id);
  return products.map((product) => ({
    product,
    variants: variantsOf.get(product.id) ?? [],
    categoryIds: (categoriesOf.get(product.id) ?? []).map((c) => c.category_id),
  }));
}

function groupBy<T>(rows: T[], key: (row: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const row of rows) {
    const k = key(row);
    const list = out.get(k);
    if (list) list.push(row);
    else out.set(k, [row]);
  }
  return out;
}

const PRODUCT_COLUMNS = [
  'id',
  'title',
  'handle',
  'status',
  'description',
  'thumbnail',
  'images',
  'brand',
  'catalog_managed',
  'handling',
  'rejection_reason',
  'created_at',
  'updated_at',
];

/** One page of the seller's products, newest first by id, filtered in the same query that cuts the page. */
export async function listProducts(
  db: Db,
  sellerId: string,
  opts: { status?: string; afterId?: string; limit: number },
): Promise<{ rows: ProductWithParts[]; hasMore: boolean }> {
  if (opts.status !== undefined && !isStorableText(opts.status)) return { rows: [], hasMore: false };
  return inSnapshot(db, async (trx) => {
    const query = trx('products')
      .where({ seller_id: sellerId })
      .orderBy('id', 'desc')
      .limit(opts.limit + 1)
      .select(PRODUCT_COLUMNS);
    if (opts.status !== undefined) query.andWhere({ status: opts.status });
    if (opts.afterId !== undefined) query.andWhere('id', '<', opts.afterId);
    const products: ProductRow[] = await query;
    const hasMore = products.length > opts.limit;
    return { rows: await loadProducts(trx, sellerId, products.slice(0, opts.limit)), hasMore };
  });
}

/** The first (oldest) of the seller's products carrying a variant with `sku`, whole. */
export async function findProductBySku(db: Db, sellerId: string, sku: string): Promise<ProductWithParts | null> {
  if (!isStorableText(sku)) return null;
  return inSnapshot(db, async (trx) => {
    const product: ProductRow | undefined = await trx('products')
      .where('products.seller_id', sellerId)
      .whereExists(
        trx('variants')
          .whereRaw('variants.product_id = products.id')
          .andWhere({ 'variants.seller_id': sellerId, 'variants.sku': sku }),
      )
      .orderBy('id', 'asc')
      .first(PRODUCT_COLUMNS);
    if (!product) return null;
    const [whole] = await loadProducts(trx, sellerId, [product]);
    return whole;
  });
}
