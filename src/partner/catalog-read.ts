import { isStorableText } from '../lib/text';
import type { Db } from '../db/knex';

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

/**
 * Each variant of the product `p` as JSON, oldest first, with its stock summed over locations (each
 * location's level rounded half away from zero).
 */
const VARIANTS_OF_P = `COALESCE((
  SELECT json_agg(json_build_object(
           'id', v.id, 'offer_id', v.offer_id, 'product_id', v.product_id, 'sku', v.sku, 'options', v.options,
           'price', v.price, 'sale_price', v.sale_price, 'campaign_label', v.campaign_label,
           'condition', v.condition, 'notes', v.notes,
           'stocked_quantity', COALESCE((SELECT SUM(ROUND(sl.level)) FROM stock_levels sl WHERE sl.variant_id = v.id), 0)::bigint
         ) ORDER BY v.created_at, v.id)
    FROM variants v WHERE v.seller_id = p.seller_id AND v.product_id = p.id), '[]') AS variants`;

/** The category ids of the product `p`, in its order. */
const CATEGORY_IDS_OF_P = `COALESCE((SELECT array_agg(pc.category_id ORDER BY pc.position)
    FROM product_categories pc WHERE pc.product_id = p.id), '{}') AS category_ids`;

/**
 * The seller's products (filtered by the caller) with their variants and category ids, all in one
 * statement: one moment (a bulk upsert never shows half done), one round trip whatever the page size.
 */
function productsWithParts(db: Db, sellerId: string) {
  return db('products as p')
    .where('p.seller_id', sellerId)
    .select(...PRODUCT_COLUMNS.map((c) => `p.${c}`), db.raw(VARIANTS_OF_P), db.raw(CATEGORY_IDS_OF_P));
}

type PartsRow = ProductRow & { variants: VariantRow[]; category_ids: string[] };

const withParts = ({ variants, category_ids: categoryIds, ...product }: PartsRow): ProductWithParts => ({
  product,
  variants,
  categoryIds,
});

/** One page of the seller's products, newest first by id, filtered in the same query that cuts the page. */
export async function listProducts(
  db: Db,
  sellerId: string,
  opts: { status?: string; afterId?: string; limit: number },
): Promise<{ rows: ProductWithParts[]; hasMore: boolean }> {
  if (opts.status !== undefined && !isStorableText(opts.status)) return { rows: [], hasMore: false };
  const query = productsWithParts(db, sellerId)
    .orderBy('p.id', 'desc')
    .limit(opts.limit + 1);
  if (opts.status !== undefined) query.andWhere({ 'p.status': opts.status });
  if (opts.afterId !== undefined) query.andWhere('p.id', '<', opts.afterId);
  const rows: PartsRow[] = await query;
  return { rows: rows.slice(0, opts.limit).map(withParts), hasMore: rows.length > opts.limit };
}

/** The first (oldest) of the seller's products carrying a variant with `sku`, whole. */
export async function findProductBySku(db: Db, sellerId: string, sku: string): Promise<ProductWithParts | null> {
  if (!isStorableText(sku)) return null;
  const row: PartsRow | undefined = await productsWithParts(db, sellerId)
    .whereExists(
      db('variants')
        .whereRaw('variants.product_id = p.id')
        .andWhere({ 'variants.seller_id': sellerId, 'variants.sku': sku }),
    )
    .orderBy('p.id', 'asc')
    .first();
  return row ? withParts(row) : null;
}

/** The seller's product `productId`, whole; null for none or another seller's. */
export async function findProductById(db: Db, sellerId: string, productId: string): Promise<ProductWithParts | null> {
  if (!isStorableText(productId)) return null;
  const row: PartsRow | undefined = await productsWithParts(db, sellerId).andWhere('p.id', productId).first();
  return row ? withParts(row) : null;
}
