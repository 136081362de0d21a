import { z } from 'zod';
import {
  adjustmentIn,
  adjustmentOut,
  BULK_INVENTORY_ROWS,
  BULK_PRODUCT_ROWS,
  bulkBody,
  bulkResultsOut,
  healthOut,
  inventoryRowIn,
  orderIdParam,
  orderListQuery,
  orderOut,
  orderPageOut,
  productListQuery,
  productOut,
  productPageOut,
  productRowIn,
  skuParam,
} from '../partner/schemas';
import { ApiStyle, buildDocument, OperationSpec } from './build';

/** The Partner API's error codes by status, as the contract lists them. */
const errors = {
  '400 validation_error':
    'A field is missing or invalid (including `since` and `cursor`), a batch is empty or over its cap, or Idempotency-Key is over 255 characters; `details` lists `field` and `issue`.',
  '400 idempotency_key_required': 'A write request without an Idempotency-Key header.',
  '400 (framework)': 'Malformed JSON.',
  '401 invalid_api_key': 'No Bearer key, or a malformed, unknown, wrong-secret or revoked key.',
  '401 api_key_wrong_environment': 'A test key sent to Live, or a live key sent to Sandbox.',
  '403 insufficient_scope': "The key lacks the endpoint's scope; the message names it.",
  '404 product_not_found': 'No product has that SKU.',
  '404 inventory_item_not_found': "A SKU or location_id is not the seller's.",
  '404 order_not_found': "No such order, or another seller's.",
  '409 idempotency_key_conflict': 'The same Idempotency-Key with a different body or on another route.',
  '409 idempotency_key_in_progress': 'The first request with this Idempotency-Key is still running; retry shortly.',
  '413 (framework)': 'The body is over 100 KB.',
  '422 validation_error':
    'The adjustment would take stock below zero (issue `negative_result`), or the seller has no stock location configured.',
  '429 rate_limited': 'Over the bulk route limit (60 requests per 600 s per key and route); see Retry-After.',
  '500 internal_error':
    'Unexpected failure; retry reads with backoff. On a write route it is stored against the Idempotency-Key and replayed.',
  '503 service_unavailable':
    'The database did not answer within its deadline; retry after Retry-After. On a write route it is stored against the Idempotency-Key like a 500: check the current state, then resend under a new key.',
};

const detail = z.object({
  field: z.string().optional().meta({ example: 'items[3].external_sku' }),
  issue: z.string().meta({
    description:
      'missing, invalid, too_many, empty, not_applicable, duplicate_variant, negative_result (or too_deep for the whole body).',
    example: 'missing',
  }),
});

const frameworkError = z
  .object({ message: z.string(), type: z.string() })
  .meta({ id: 'PartnerFrameworkError', description: 'Malformed or over-size bodies: no `code`, no `request_id`.' });

const style: ApiStyle = {
  info: {
    title: 'Seller Partner API',
    version: '1.0.0',
    description:
      "Catalog, stock, prices and orders for a seller's ERP, POS or inventory system: bulk-first and keyed by the seller's own SKU. Money is whole Iraqi dinars (IQD). Branch on `error.code`, never on the message.",
  },
  serverUrl: '/partner/v1',
  tags: [
    { name: 'Health', description: 'Liveness; no key.' },
    { name: 'Catalog', description: 'Products and variants, keyed by SKU.' },
    { name: 'Inventory', description: 'Stock levels, prices and adjustments.' },
    { name: 'Orders', description: 'Orders placed with this seller; poll with `since`.' },
  ],
  securitySchemes: {
    partnerKey: {
      type: 'http',
      scheme: 'bearer',
      description:
        '`Authorization: Bearer svc_sk_{test|live}_…`: one seller, chosen scopes. Test keys work only in Sandbox, live keys only in Live. Treat the key as opaque.',
    },
  },
  errors,
  errorEnvelope: z
    .object({
      error: z.object({
        code: z.string().meta({ description: 'Branch on this; see each response for the codes of its status.' }),
        message: z.string().meta({ description: 'English text; do not branch on it.' }),
        details: z.array(detail).optional(),
        request_id: z.string().meta({ description: 'The X-Request-Id sent, else a generated `req_…` id.' }),
      }),
    })
    .meta({ id: 'PartnerError' }),
  errorExample: (code, message) => ({ error: { code, message, request_id: 'req_8f2c1d9e0a7b4c5d' } }),
  extraBodies: {
    400: { schema: frameworkError, example: { message: 'Unexpected token in JSON body', type: 'entity.parse.failed' } },
    413: { schema: frameworkError, example: { message: 'request entity too large', type: 'entity.too.large' } },
  },
  requestIdHeader: 'X-Request-Id',
  idempotencyKey: z.string().min(1).max(255).meta({
    description:
      'Required on the write routes: 1 to 255 characters, scoped to the API key. The first outcome is stored 24 hours and replayed with `Idempotent-Replayed: true`.',
    example: 'sync-2026-11-21T10:00:00Z-batch-7',
  }),
};

const key = (scope: string) => [{ partnerKey: [scope] }];
const AUTH = [
  '401 invalid_api_key',
  '401 api_key_wrong_environment',
  '403 insufficient_scope',
  '500 internal_error',
  '503 service_unavailable',
];
const WRITE = [
  ...AUTH,
  '400 validation_error',
  '400 idempotency_key_required',
  '409 idempotency_key_conflict',
  '409 idempotency_key_in_progress',
];

const productExample = {
  id: 'prod_01JD0Q5V7W3X9Y2Z4A6B8C0D1E',
  title: 'T-shirt',
  handle: 't-shirt',
  status: 'draft',
  description: '',
  thumbnail: null,
  images: [],
  category_ids: [],
  brand: null,
  variants: [
    {
      offer_id: 'off_01JD0Q5V7W3X9Y2Z4A6B8C0D1F',
      variant_id: 'var_01JD0Q5V7W3X9Y2Z4A6B8C0D1G',
      sku: 'TSHIRT-RED-M',
      options: { Title: 'Default' },
      price: 25000,
      sale_price: null,
      campaign_label: null,
      stocked_quantity: 10,
      condition: null,
      notes: null,
    },
  ],
  catalog_managed: false,
  handling: null,
  rejection_reason: null,
  created_at: '2026-11-21T10:00:00.000Z',
  updated_at: '2026-11-21T10:00:00.000Z',
};
const orderSummaryExample = {
  order_id: 'order_01JD0Q5V7W3X9Y2Z4A6B8C0D1E',
  increment_id: '1042',
  status: 'pending',
  total: 50000,
  currency: 'IQD',
  created_at: '2026-11-21T10:00:00.000Z',
};

const operations: OperationSpec[] = [
  {
    method: 'get',
    path: '/health',
    operationId: 'getHealth',
    summary: 'Health',
    description: 'Answers 200 whatever Authorization header is sent.',
    tag: 'Health',
    security: [],
    ok: {
      status: 200,
      description: 'The API is up.',
      schema: healthOut,
      example: { status: 'ok', api: 'partner', version: 'v1', currency: 'IQD' },
    },
    errors: ['500 internal_error'],
  },
  {
    method: 'get',
    path: '/products',
    operationId: 'listProducts',
    links: {
      GetProductBySku: { operationId: 'getProductBySku', parameters: { sku: '$response.body#/data/0/variants/0/sku' } },
    },
    summary: 'List products',
    description:
      "Newest product first (by product id). `limit` counts products; each carries all of the seller's variants, so a product never appears on two pages.",
    tag: 'Catalog',
    security: key('catalog:read'),
    params: { query: productListQuery },
    ok: {
      status: 200,
      description: 'One page of products.',
      schema: productPageOut,
      example: { data: [productExample], next_cursor: null, has_more: false },
    },
    errors: [...AUTH, '400 validation_error'],
  },
  {
    method: 'get',
    path: '/products/{sku}',
    operationId: 'getProductBySku',
    summary: 'Get a product by SKU',
    description: "Any variant's SKU returns the whole product; if a SKU is on several products the first is returned.",
    tag: 'Catalog',
    security: key('catalog:read'),
    params: { path: skuParam },
    ok: { status: 200, description: 'The product.', schema: productOut, example: productExample },
    errors: [...AUTH, '404 product_not_found'],
  },
  {
    method: 'post',
    path: '/products/bulk',
    operationId: 'bulkUpsertProducts',
    summary: 'Create or update products by SKU',
    description:
      'A known SKU updates title, description and category_ids (a published product goes back to proposed); a new SKU creates a draft product with one Default variant. Every row problem is a rejected row inside the 200. Check order: key, scope, Idempotency-Key, stored outcome, rate limit, body, rows.',
    tag: 'Catalog',
    security: key('catalog:write'),
    idempotent: true,
    rateLimit: 'products-bulk',
    body: {
      schema: bulkBody(productRowIn, BULK_PRODUCT_ROWS).meta({ id: 'PartnerProductBulkIn' }),
      example: { items: [{ external_sku: 'TSHIRT-RED-M', title: 'T-shirt', price_iqd: 25000, initial_stock: 10 }] },
    },
    ok: {
      status: 200,
      description: 'One result per row, in request order (returned even when every row is rejected).',
      schema: bulkResultsOut,
      example: {
        results: [{ external_sku: 'TSHIRT-RED-M', status: 'accepted', product_id: 'prod_01JD0Q5V7W3X9Y2Z4A6B8C0D1E' }],
      },
    },
    errors: [...WRITE, '429 rate_limited'],
  },
  {
    method: 'patch',
    path: '/inventory/bulk',
    operationId: 'bulkUpdateInventory',
    summary: 'Set stock and prices by SKU',
    description:
      'Absolute stock at the primary location (`on_hand`), then the list price (`price_iqd`, single-variant products only). A row that fails validation is rejected; the others still run.',
    tag: 'Inventory',
    security: key('inventory:write'),
    idempotent: true,
    rateLimit: 'inventory-bulk',
    body: {
      schema: bulkBody(inventoryRowIn, BULK_INVENTORY_ROWS).meta({ id: 'PartnerInventoryBulkIn' }),
      example: { items: [{ external_sku: 'TSHIRT-RED-M', on_hand: 12, price_iqd: 24000 }] },
    },
    ok: {
      status: 200,
      description: 'One result per row, in request order.',
      schema: bulkResultsOut,
      example: {
        results: [
          { external_sku: 'TSHIRT-RED-M', status: 'accepted' },
          {
            external_sku: 'MUG-2',
            status: 'rejected',
            error: { code: 'product_not_found', message: 'No product has SKU MUG-2.' },
          },
        ],
      },
    },
    errors: [...WRITE, '429 rate_limited'],
  },
  {
    method: 'post',
    path: '/inventory/adjustments',
    operationId: 'adjustInventory',
    summary: 'Post stock adjustments',
    description:
      'Signed deltas with an audit entry per item, all or nothing. Every problem of the body is listed at once. Check order: key, scope, Idempotency-Key, stored outcome, body, SKUs and locations, write (no rate limit).',
    tag: 'Inventory',
    security: key('inventory:write'),
    idempotent: true,
    body: { schema: adjustmentIn, example: adjustmentIn.meta()?.example },
    ok: {
      status: 200,
      description: 'The adjustment, echoing reason and category, one row per adjusted variant.',
      schema: adjustmentOut,
      example: {
        reason: 'Stock count',
        category: 'correction',
        data: [
          {
            adjustment_id: 'adj_01JD0Q5V7W3X9Y2Z4A6B8C0D1E',
            external_sku: 'TSHIRT-RED-M',
            variant_id: 'var_01JD0Q5V7W3X9Y2Z4A6B8C0D1G',
            location_id: 'loc_01JD0Q5V7W3X9Y2Z4A6B8C0D1H',
            delta: -2,
            stocked_quantity: 8,
          },
        ],
      },
    },
    errors: [...WRITE, '404 inventory_item_not_found', '422 validation_error'],
  },
  {
    method: 'get',
    path: '/orders',
    operationId: 'listOrders',
    links: { GetOrder: { operationId: 'getOrder', parameters: { id: '$response.body#/data/0/order_id' } } },
    summary: 'List orders',
    description:
      'Newest first by when the order was placed with this seller. Poll with `since` on a schedule; there are no order webhooks.',
    tag: 'Orders',
    security: key('orders:read'),
    params: { query: orderListQuery },
    ok: {
      status: 200,
      description: 'One page of order summaries.',
      schema: orderPageOut,
      example: { data: [orderSummaryExample], next_cursor: null, has_more: false },
    },
    errors: [...AUTH, '400 validation_error'],
  },
  {
    method: 'get',
    path: '/orders/{id}',
    operationId: 'getOrder',
    summary: 'Get an order',
    tag: 'Orders',
    security: key('orders:read'),
    params: { path: orderIdParam },
    ok: {
      status: 200,
      description: 'The order with items, shipping address and settlement.',
      schema: orderOut,
      example: {
        ...orderSummaryExample,
        shipping_address: {
          first_name: 'Zahra',
          last_name: 'Ali',
          address_1: 'Street 14',
          city: 'Baghdad',
          phone: '+9647701234567',
        },
        items: [
          {
            item_id: 'oi_01JD0Q5V7W3X9Y2Z4A6B8C0D1E',
            title: 'T-shirt',
            quantity: 2,
            unit_price: 25000,
            variant_id: 'var_01JD0Q5V7W3X9Y2Z4A6B8C0D1G',
            external_sku: 'TSHIRT-RED-M',
          },
        ],
        accepted_at: null,
        shipped_at: null,
        tracking_number: null,
        carrier: null,
        settlement: {
          status: 'held',
          commission_percent: 10,
          commission_amount: 5000,
          earnings: 45000,
          hold_days: 14,
          hold_starts_at: null,
          funds_released_at: null,
          delivery_confirmation_source: null,
        },
      },
    },
    errors: [...AUTH, '404 order_not_found'],
  },
];

/** The Partner API's OpenAPI 3.1 document, generated from its zod schemas. */
export const partnerDocument = () => buildDocument(style, operations);
