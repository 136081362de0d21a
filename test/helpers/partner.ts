import { run } from '../../src/cli/run';
import { loadSettings } from '../../src/config';
import type { Db } from '../../src/db/knex';
import { randomString, timeOrderedBody } from '../../src/lib/ids';
import type { ProductStatus } from '../../src/ops/products';
import { call, TestResponse } from './http';

let counter = 0;
/** A SKU no other test uses. */
export const uniqueSku = (prefix = 'SKU') => `${prefix}-${Date.now().toString(36)}-${++counter}`;
/** An Idempotency-Key no other request uses. */
export const idemKey = () => `idem-${randomString(20)}`;

/** Runs an operator CLI command in process with `--json` and returns its document; throws on failure. */
export async function ops(db: Db, ...argv: string[]): Promise<any> {
  const settings = loadSettings({ DATABASE_URL: 'postgres://unused@127.0.0.1/unused', LOG_LEVEL: 'silent' });
  const result = await run([...argv, '--json'], { db, settings });
  if (result.exitCode !== 0) throw new Error(`ops ${argv.join(' ')} failed: ${result.stdout}${result.stderr}`);
  return JSON.parse(result.stdout);
}

export interface SeededProduct {
  id: string;
  sku: string;
  variantId: string;
}

/**
 * Seeds `count` single-variant products for the seller in three set-based statements. Ids are
 * time-ordered like the service's, and within the batch ordered by index, so the last one seeded
 * is the newest. SKUs are `${prefix}-000001`…; stock goes to the seller's primary location.
 */
export async function seedProducts(
  db: Db,
  sellerId: string,
  count: number,
  opts: {
    prefix?: string;
    status?: ProductStatus | ((i: number) => ProductStatus);
    price?: number;
    stock?: number;
  } = {},
): Promise<SeededProduct[]> {
  const prefix = opts.prefix ?? uniqueSku('SEED');
  const stem = `${timeOrderedBody().slice(0, 10)}${randomString(6, '0123456789abcdefghjkmnpqrstvwxyz')}`;
  const statuses = Array.from({ length: count }, (_, i) =>
    typeof opts.status === 'function' ? opts.status(i + 1) : (opts.status ?? 'draft'),
  );
  const { rows } = await db.raw(
    `WITH n AS (SELECT i, lpad(i::text, 10, '0') AS pad, (?::text[])[i] AS status FROM generate_series(1, ?::int) AS i),
     p AS (
       INSERT INTO products (id, seller_id, title, handle, status)
       SELECT 'prod_' || ? || pad, ?, 'Seeded product ' || i, 'seeded-' || ? || '-' || i, status FROM n
       RETURNING id
     ),
     v AS (
       INSERT INTO variants (id, offer_id, product_id, seller_id, sku, options, price)
       SELECT 'var_' || ? || pad, 'off_' || ? || pad, 'prod_' || ? || pad, ?, ? || '-' || lpad(i::text, 6, '0'),
              '{"Default":"Default"}', ?
         FROM n
       RETURNING id, product_id, sku
     )
     SELECT v.id AS variant_id, v.product_id, v.sku FROM v ORDER BY v.product_id`,
    [statuses, count, stem, sellerId, stem, stem, stem, stem, sellerId, prefix, opts.price ?? 10_000],
  );
  await db.raw(
    `INSERT INTO stock_levels (variant_id, location_id, level)
     SELECT v.id, l.id, ? FROM variants v
       JOIN stock_locations l ON l.seller_id = v.seller_id AND l.position = 0
      WHERE v.id = ANY(?)`,
    [opts.stock ?? 0, rows.map((r: { variant_id: string }) => r.variant_id)],
  );
  return rows.map((r: { variant_id: string; product_id: string; sku: string }) => ({
    id: r.product_id,
    sku: r.sku,
    variantId: r.variant_id,
  }));
}

/** The Partner API for one key, over real HTTP; write calls send a fresh Idempotency-Key unless given one (null: none). */
export function partnerClient(baseUrl: string, key: string) {
  const base = '/partner/v1';
  return {
    get: (path: string, headers: Record<string, string> = {}): Promise<TestResponse> =>
      call(baseUrl, 'GET', base + path, { key, headers }),
    bulkProducts: (body: unknown, idempotencyKey: string | null = idemKey()): Promise<TestResponse> =>
      call(baseUrl, 'POST', `${base}/products/bulk`, { key, body, idempotencyKey: idempotencyKey ?? undefined }),
    bulkInventory: (body: unknown, idempotencyKey: string | null = idemKey()): Promise<TestResponse> =>
      call(baseUrl, 'PATCH', `${base}/inventory/bulk`, { key, body, idempotencyKey: idempotencyKey ?? undefined }),
    adjust: (body: unknown, idempotencyKey: string | null = idemKey()): Promise<TestResponse> =>
      call(baseUrl, 'POST', `${base}/inventory/adjustments`, {
        key,
        body,
        idempotencyKey: idempotencyKey ?? undefined,
      }),
  };
}
export type PartnerClient = ReturnType<typeof partnerClient>;

/** Follows `next_cursor` from the first page of `path` (which may carry a query) until `has_more` is false. */
export async function pageAll(
  client: PartnerClient,
  path: string,
): Promise<{ pages: Array<{ data: any[]; next_cursor: string | null; has_more: boolean }>; rows: any[] }> {
  const pages = [];
  const sep = path.includes('?') ? '&' : '?';
  let cursor: string | null = null;
  for (;;) {
    const res = await client.get(cursor ? `${path}${sep}cursor=${encodeURIComponent(cursor)}` : path);
    if (res.status !== 200) throw new Error(`GET ${path} answered ${res.status}: ${res.text}`);
    pages.push(res.body);
    if (!res.body.has_more) break;
    cursor = res.body.next_cursor;
    if (pages.length > 1000) throw new Error('paging does not end');
  }
  return { pages, rows: pages.flatMap((p) => p.data) };
}

/**
 * Seeds `count` pending orders for the seller (one item of `sku` each, with a held settlement) in
 * set-based statements; order i (1-based) is placed at `at(i)`. Returns ids in seeding order.
 */
export async function seedOrders(
  db: Db,
  sellerId: string,
  count: number,
  opts: { at: (i: number) => Date; sku?: string; variantId?: string },
): Promise<string[]> {
  const stem = `${timeOrderedBody().slice(0, 10)}${randomString(6, '0123456789abcdefghjkmnpqrstvwxyz')}`;
  const times = Array.from({ length: count }, (_, i) => opts.at(i + 1).toISOString());
  const { rows } = await db.raw(
    `WITH n AS (SELECT i, lpad(i::text, 10, '0') AS pad, (?::timestamptz[])[i] AS at FROM generate_series(1, ?::int) AS i),
     o AS (
       INSERT INTO orders (id, seller_id, increment_id, status, total, currency, shipping_address, created_at, updated_at)
       SELECT 'ord_' || ? || pad, ?, 'S' || ? || pad, 'pending', 1000, 'IQD', '{"first_name":"Zainab"}', at, at FROM n
       RETURNING id
     ),
     it AS (
       INSERT INTO order_items (id, order_id, variant_id, external_sku, title, quantity, unit_price, position)
       SELECT 'item_' || ? || pad, 'ord_' || ? || pad, ?, ?, 'Seeded item', 1, 1000, 0 FROM n
     ),
     s AS (
       INSERT INTO settlements (order_id, seller_id, status, commission_percent, commission_amount, earnings, hold_days, created_at)
       SELECT 'ord_' || ? || pad, ?, 'held', 10, 100, 900, 7, at FROM n
     )
     SELECT id FROM o ORDER BY id`,
    [
      times,
      count,
      stem,
      sellerId,
      stem,
      stem,
      stem,
      opts.variantId ?? 'var_seeded',
      opts.sku ?? 'SEEDED',
      stem,
      sellerId,
    ],
  );
  return rows.map((r: { id: string }) => r.id);
}

/** `ops stock set`: the level of the seller's `sku` at `locationId`, as the dashboard would set it. */
export const stockSet = (db: Db, sellerId: string, sku: string, locationId: string, level: string) =>
  ops(db, 'stock', 'set', '--seller', sellerId, '--sku', sku, '--location', locationId, '--level', level);

/** `ops product create-catalog`: a catalog-managed product with one variant. */
export const catalogProduct = (db: Db, sellerId: string, sku: string, title: string, price: string) =>
  ops(db, 'product', 'create-catalog', '--seller', sellerId, '--sku', sku, '--title', title, '--price', price);
