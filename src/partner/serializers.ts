import { iso } from '../lib/time';
import type { ProductWithParts, VariantRow } from './catalog-read';

/** Variant as the Partner API shows it. */
export function variantOut(v: VariantRow) {
  return {
    offer_id: v.offer_id,
    variant_id: v.id,
    sku: v.sku,
    options: v.options,
    price: v.price,
    sale_price: v.sale_price,
    campaign_label: v.campaign_label,
    stocked_quantity: Number(v.stocked_quantity),
    condition: v.condition,
    notes: v.notes,
  };
}

/** Product as the Partner API shows it, list entry and single read alike. */
export function productOut({ product: p, variants, categoryIds }: ProductWithParts) {
  return {
    id: p.id,
    title: p.title,
    handle: p.handle,
    status: p.status,
    description: p.description,
    thumbnail: p.thumbnail,
    images: p.images,
    category_ids: categoryIds,
    brand: p.brand,
    variants: variants.map(variantOut),
    catalog_managed: p.catalog_managed,
    handling: p.handling,
    rejection_reason: p.rejection_reason,
    created_at: iso(p.created_at),
    updated_at: iso(p.updated_at),
  };
}
