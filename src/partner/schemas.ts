import { z } from 'zod';
import { decodeCursor } from '../http/cursor';
import { isStorableText } from '../lib/text';
import { parseRfc3339 } from './since';

export const BULK_PRODUCT_ROWS = 50;
export const BULK_INVENTORY_ROWS = 500;
export const MAX_ADJUSTMENT_ROWS = 100;

/** Page sizes of the list routes: `limit` defaults and caps. */
export const PRODUCTS_PAGE = { defaultLimit: 20, maxLimit: 100 } as const;
export const ORDERS_PAGE = { defaultLimit: 50, maxLimit: 200 } as const;

/** Deltas are stored as 32-bit integers; a larger one is refused as invalid rather than failing the write. */
const MAX_ABS_DELTA = 2_147_483_647;

export const adjustmentCategories = ['damaged', 'external_sale', 'correction', 'received'] as const;
export type AdjustmentCategory = (typeof adjustmentCategories)[number];

/** Partner detail tokens: `missing` when absent or null, `invalid` when present but wrong. */
const missingOrInvalid = (issue: { input?: unknown }) =>
  issue.input === undefined || issue.input === null ? 'missing' : 'invalid';
const invalid = () => 'invalid';

/** Non-blank text Postgres can hold: absent, null or blank is `missing`, anything else wrong `invalid`. */
const requiredText = z
  .string({ error: missingOrInvalid })
  .refine((s) => s.trim() !== '', { message: 'missing', abort: true })
  .refine(isStorableText, { message: 'invalid', abort: true });

// ---- query parameters ------------------------------------------------------------------------

/** `limit` the Partner way: a non-positive-integer value is ignored (default), a larger one capped. */
export function partnerLimit(raw: unknown, page: { defaultLimit: number; maxLimit: number }): number {
  if (typeof raw !== 'string' || !/^[0-9]+$/.test(raw)) return page.defaultLimit;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n <= 0) return page.defaultLimit;
  return Math.min(n, page.maxLimit);
}

const limitParam = (page: { defaultLimit: number; maxLimit: number }) =>
  z
    .unknown()
    .optional()
    .transform((raw) => partnerLimit(raw, page))
    .meta({
      description: `Rows per page: default ${page.defaultLimit}, at most ${page.maxLimit}. A value that is not a positive integer is ignored (the default applies); a larger one is capped.`,
      override: { type: 'integer', minimum: 1, default: page.defaultLimit, example: page.defaultLimit },
    });

const isId = (v: unknown): v is string => typeof v === 'string' && v !== '' && isStorableText(v);

/** `cursor`: the decoded keyset of `list` (checked by `key`), or null when absent or empty; anything else is `invalid`. */
const cursorParam = <T>(list: string, key: (k: Array<string | number>) => T | null) =>
  z
    .string({ error: invalid })
    .optional()
    .transform((raw, ctx) => {
      if (raw === undefined || raw === '') return null;
      const decoded = decodeCursorOrNull(list, raw);
      const out = decoded === null ? null : key(decoded);
      if (out === null) ctx.addIssue({ code: 'custom', message: 'invalid' });
      return out;
    })
    .meta({
      description:
        'The `next_cursor` of the previous page; omit for the first page. Anything that is not a cursor from this list is `400 validation_error` (field `cursor`, issue `invalid`).',
      example: 'eyJ2IjoyLCJsIjoicHJvZHVjdHMiLCJrIjpbInByb2RfMDEiXX0',
    });

function decodeCursorOrNull(list: string, raw: string): Array<string | number> | null {
  try {
    return decodeCursor(list, raw, () => new Error('invalid') as never);
  } catch {
    return null;
  }
}

/** Where a page of orders ends: the last row's settlement created_at and order id. */
export interface OrdersKey {
  placedAt: Date;
  id: string;
}

export const productListQuery = z.object({
  status: z
    .string({ error: invalid })
    .optional()
    .transform((s) => (s === '' ? undefined : s))
    .meta({
      description: 'Keep only products with this status; an unknown value matches nothing. Sent twice is `invalid`.',
      example: 'published',
    }),
  cursor: cursorParam('products', (k) => (k.length === 1 && isId(k[0]) ? k[0] : null)),
  limit: limitParam(PRODUCTS_PAGE),
});

export const orderListQuery = z.object({
  since: z
    .string({ error: invalid })
    .optional()
    .transform((raw, ctx) => {
      if (raw === undefined || raw === '') return undefined;
      const since = parseRfc3339(raw);
      if (since === null) ctx.addIssue({ code: 'custom', message: 'invalid' });
      return since ?? undefined;
    })
    .meta({
      description:
        'Only orders placed with this seller at or after this instant: RFC 3339 with a zone (encode `+` as `%2B`). Absent or empty is no bound.',
      override: { type: 'string', format: 'date-time', example: '2026-11-21T10:00:00Z' },
    }),
  cursor: cursorParam('orders', ([placedAt, id, ...rest]): OrdersKey | null => {
    const at = typeof placedAt === 'string' ? parseRfc3339(placedAt) : null;
    return rest.length === 0 && at !== null && isId(id) ? { placedAt: at, id } : null;
  }),
  limit: limitParam(ORDERS_PAGE),
});

export const skuParam = z.object({
  sku: z.string().min(1).meta({ description: "The seller's SKU, URL-encoded.", example: 'TSHIRT-RED-M' }),
});
export const orderIdParam = z.object({
  id: z.string().min(1).meta({ description: 'The `order_id` from the list.', example: 'order_01JD0Q5V7W' }),
});

// ---- bodies ------------------------------------------------------------------------------------

/** The SKU of a bulk row: non-blank text Postgres can hold (else the row is rejected, `external_sku` null). */
const rowSku = z
  .string()
  .refine((s) => s.trim() !== '' && isStorableText(s))
  .meta({ description: "The seller's own SKU; required, non-blank.", example: 'TSHIRT-RED-M' });

/**
 * A `POST /products/bulk` row. Rows are read one by one: a field of the wrong JSON type is
 * dropped; other problems reject that row inside a `200` (never a `400`).
 */
export const productRowIn = z
  .object({
    external_sku: rowSku,
    title: z.string().optional().meta({ description: 'Required on create; must not be blank.' }),
    price_iqd: z
      .number()
      .optional()
      .meta({ description: 'Whole IQD, 0 or more; required on create, ignored on update.', example: 25000 }),
    description: z.string().optional(),
    category_ids: z.array(z.string()).optional().meta({ description: "Replaces the product's categories on update." }),
    initial_stock: z
      .number()
      .optional()
      .meta({ description: 'Whole number, 0 or more (default 0); create only.', example: 10 }),
  })
  .meta({ id: 'PartnerProductRow' });

/** A `PATCH /inventory/bulk` row (read like a product row; `null` counts as not set). */
export const inventoryRowIn = z
  .object({
    external_sku: rowSku,
    on_hand: z
      .number()
      .nullish()
      .meta({ description: 'Absolute stock at the primary location: a whole number, 0 or more.', example: 12 }),
    price_iqd: z
      .number()
      .nullish()
      .meta({ description: 'Absolute list price in whole IQD (single-variant products only).', example: 25000 }),
  })
  .meta({ id: 'PartnerInventoryRow' });

/** The bulk routes' one top-level check: `items` is 1 to `max` rows (else issue `missing` or `too_many`). */
export const bulkBody = <R extends z.ZodType>(row: R, max: number) =>
  z.object({
    items: z
      .array(row, { error: () => 'missing' })
      .min(1, 'missing')
      .max(max, 'too_many')
      .meta({ description: `1 to ${max} rows; results come back in the same order.` }),
  });

/** One `POST /inventory/adjustments` item; a repeated SKU is `duplicate_variant`. */
export const adjustmentItemIn = z.object(
  {
    external_sku: requiredText.meta({ example: 'TSHIRT-RED-M' }),
    delta: z
      .number({ error: missingOrInvalid })
      .int({ error: invalid, abort: true })
      .refine((d) => d !== 0 && Math.abs(d) <= MAX_ABS_DELTA, { message: 'invalid', abort: true })
      .meta({ description: 'Signed, non-zero whole units.', example: -2 }),
    location_id: z
      .string({ error: invalid })
      .refine((s) => s.trim() !== '' && isStorableText(s), 'invalid')
      .nullish()
      .meta({ description: "One of the seller's stock locations; default the primary one." }),
  },
  { error: invalid },
);

export const adjustmentIn = z
  .object({
    reason: requiredText.meta({ example: 'Stock count' }),
    category: z.enum(adjustmentCategories, { error: missingOrInvalid }).meta({ example: 'damaged' }),
    unit_value: z
      .number({ error: invalid })
      .int({ error: invalid, abort: true })
      .positive({ error: invalid })
      .nullish()
      .meta({ description: 'Whole IQD per unit, more than 0; only with category `external_sale`.' }),
    items: z
      .array(adjustmentItemIn, { error: missingOrInvalid })
      .min(1, 'empty')
      .max(MAX_ADJUSTMENT_ROWS, 'too_many')
      .superRefine((items, ctx) => {
        const seen = new Set<string>();
        items.forEach((item, i) => {
          const sku = item?.external_sku;
          if (typeof sku !== 'string') return;
          if (seen.has(sku)) ctx.addIssue({ code: 'custom', message: 'duplicate_variant', path: [i, 'external_sku'] });
          seen.add(sku);
        });
      }),
  })
  // An outside sale's revenue (units × unit_value) must be an exact amount, or the request is refused.
  .refine(
    (b) =>
      b.category !== 'external_sale' ||
      b.unit_value == null ||
      b.items.every((i) => i.delta >= 0 || BigInt(-i.delta) * BigInt(b.unit_value!) <= BigInt(Number.MAX_SAFE_INTEGER)),
    { message: 'invalid', path: ['unit_value'] },
  )
  .meta({
    id: 'PartnerAdjustmentIn',
    example: { reason: 'Stock count', category: 'correction', items: [{ external_sku: 'TSHIRT-RED-M', delta: -2 }] },
  });
export type AdjustmentIn = z.output<typeof adjustmentIn>;

/** The order details list fields in: the body's keys, then each item's keys. */
export const ADJUSTMENT_FIELD_ORDER = [...Object.keys(adjustmentIn.shape), ...Object.keys(adjustmentItemIn.shape)];

// ---- responses ---------------------------------------------------------------------------------

const timestamp = z.iso.datetime().meta({ example: '2026-11-21T10:00:00.000Z' });
const iqd = z.number().int().meta({ description: 'Whole Iraqi dinars.', example: 25000 });

export const healthOut = z
  .object({ status: z.literal('ok'), api: z.literal('partner'), version: z.literal('v1'), currency: z.literal('IQD') })
  .meta({ id: 'PartnerHealth' });

export const variantOut = z
  .object({
    offer_id: z.string(),
    variant_id: z.string(),
    sku: z.string().meta({ example: 'TSHIRT-RED-M' }),
    options: z.record(z.string(), z.string()).meta({ example: { Title: 'Default' } }),
    price: iqd.meta({ description: 'List price; stays the list price during a markdown campaign.' }),
    sale_price: iqd.nullable().meta({ description: 'Set while a markdown campaign runs.' }),
    campaign_label: z.string().nullable(),
    stocked_quantity: z.number().int().meta({ description: 'On-hand units summed over all stock locations.' }),
    condition: z.string().nullable(),
    notes: z.string().nullable(),
  })
  .meta({ id: 'PartnerVariant' });
export type VariantOut = z.output<typeof variantOut>;

export const productOut = z
  .object({
    id: z.string().meta({ example: 'prod_01JD0Q5V7W3X9Y2Z4A6B8C0D1E' }),
    title: z.string(),
    handle: z.string(),
    status: z.enum(['draft', 'proposed', 'published', 'rejected']),
    description: z.string(),
    thumbnail: z.string().nullable(),
    images: z.array(z.string()),
    category_ids: z.array(z.string()),
    brand: z.object({ id: z.string(), name: z.string(), slug: z.string() }).nullable(),
    variants: z.array(variantOut),
    catalog_managed: z.boolean(),
    handling: z.enum(['none', 'fragile', 'sealed', 'cold']).nullable(),
    rejection_reason: z.string().nullable(),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'PartnerProduct' });
export type ProductOut = z.output<typeof productOut>;

/** The Partner page envelope (products and orders). */
const pageOf = <T extends z.ZodType>(row: T, id: string) =>
  z
    .object({
      data: z.array(row),
      next_cursor: z.string().nullable().meta({ description: 'Pass back as `cursor`; null on the last page.' }),
      has_more: z.boolean().meta({ description: 'False on the last page. Page on this, not on the page size.' }),
    })
    .meta({ id });

export const productPageOut = pageOf(productOut, 'PartnerProductPage');

export const rowResultOut = z
  .object({
    external_sku: z.string().nullable().meta({ description: 'Null when the row is not an object or has no SKU.' }),
    status: z.enum(['accepted', 'rejected']),
    product_id: z.string().optional().meta({ description: 'Product bulk only, on accepted rows.' }),
    error: z
      .object({
        code: z.enum([
          'validation_error',
          'product_not_found',
          'inventory_item_not_found',
          'product_has_multiple_variants',
          'catalog_only_category',
          'catalog_product_locked',
          'internal_error',
        ]),
        message: z.string(),
      })
      .optional()
      .meta({ description: 'On rejected rows.' }),
  })
  .meta({ id: 'PartnerRowResult' });

export const bulkResultsOut = z
  .object({ results: z.array(rowResultOut).meta({ description: 'One per row, in request order.' }) })
  .meta({ id: 'PartnerBulkResults' });

export const adjustmentOut = z
  .object({
    reason: z.string(),
    category: z.enum(adjustmentCategories),
    data: z.array(
      z.object({
        adjustment_id: z.string(),
        external_sku: z.string(),
        variant_id: z.string(),
        location_id: z.string(),
        delta: z.number().int(),
        stocked_quantity: z.number().int().meta({ description: "The variant's total after the adjustment." }),
      }),
    ),
  })
  .meta({ id: 'PartnerAdjustmentResult' });

const orderStatus = z.enum(['pending', 'accepted', 'shipped', 'delivered', 'cancelled', 'returned']);

const orderSummaryShape = {
  order_id: z.string(),
  increment_id: z.string().meta({ description: 'Human-readable order number.' }),
  status: orderStatus,
  total: iqd,
  currency: z.literal('IQD'),
  created_at: timestamp.meta({ description: "When the seller's settlement record was created (order placed)." }),
};

export const orderSummaryOut = z.object(orderSummaryShape).meta({ id: 'PartnerOrderSummary' });
export const orderPageOut = pageOf(orderSummaryOut, 'PartnerOrderPage');

export const orderOut = z
  .object({
    ...orderSummaryShape,
    shipping_address: z.object({
      first_name: z.string(),
      last_name: z.string(),
      address_1: z.string(),
      city: z.string(),
      phone: z.string(),
    }),
    items: z.array(
      z.object({
        item_id: z.string(),
        title: z.string(),
        quantity: z.number().int(),
        unit_price: iqd,
        variant_id: z.string(),
        external_sku: z.string().meta({ description: "The seller's SKU at the time of the order." }),
      }),
    ),
    accepted_at: timestamp.nullable(),
    shipped_at: timestamp.nullable(),
    tracking_number: z.string().nullable(),
    carrier: z.string().nullable(),
    settlement: z.object({
      status: z.enum(['held', 'released', 'reversed']),
      commission_percent: z.number(),
      commission_amount: iqd,
      earnings: iqd,
      hold_days: z.number().int(),
      hold_starts_at: timestamp.nullable(),
      funds_released_at: timestamp.nullable(),
      delivery_confirmation_source: z.string().nullable(),
    }),
  })
  .meta({ id: 'PartnerOrder' });
