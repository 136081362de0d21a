import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Client as PgClient } from 'pg';
import { Client as TemporalClient } from '@temporalio/client';
import { createApp } from '../src/app';
import { loadSettings } from '../src/config';
import { createDb, Db, migrateLatest } from '../src/db/knex';
import { partnerScopes } from '../src/keys/scopes';
import { newId, randomString, timeOrderedBody } from '../src/lib/ids';
import { systemClock } from '../src/lib/clock';
import { setLogLevel } from '../src/lib/log';
import { createPartnerKey } from '../src/ops/partner-keys';
import { productHandle } from '../src/ops/handles';
import { defaultVariantOptions } from '../src/ops/products';
import { createSeller } from '../src/ops/sellers';
import { encodeProductsCursor } from '../src/partner/params';
import { BULK_INVENTORY_ROWS, BULK_PRODUCT_ROWS } from '../src/partner/schemas';
import { benchHttpClient } from './bench/http-client';
import { percentile, table } from './bench/measure';
import { startEmbeddedPg, type EmbeddedPg } from './embedded-pg';
import { freePort, repoRoot } from './processes';
import { bulkLoadDeadlines } from '../src/db/deadlines';

/**
 * `npm run bench:partner`: the Partner API's bulk writes and paging, measured over HTTP against
 * the real app (in process) on a database of its own with 100,000 products:
 *
 * - `PATCH /inventory/bulk` with 500 rows (on_hand and price_iqd) within 1.5× the same update done
 *   as one raw SQL statement on the same database (the floor);
 * - `POST /products/bulk` with 50 rows (25 updates of existing SKUs, 25 new products with stock)
 *   beside the same upsert as one raw SQL statement (a figure, no target);
 * - a deep page of `GET /products?limit=100` within 1.2× the first page.
 *
 * Uses DATABASE_URL's server (a database `svc_bench_<ts>` is created and dropped), or a durable
 * embedded Postgres when DATABASE_URL is unset. BENCH_PRODUCTS, BENCH_ITERATIONS and BENCH_WARMUP
 * change the sizes; BENCH_STRICT=1 exits 1 when a target is missed; BENCH_KEEP=1 keeps the database
 * (for EXPLAIN ANALYZE).
 */

const PRODUCTS = Number(process.env.BENCH_PRODUCTS ?? 100_000);
const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 40);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 10);
const STRICT = process.env.BENCH_STRICT === '1';
const KEEP = process.env.BENCH_KEEP === '1';
const PAGE_LIMIT = 100;
const BULK_TARGET = 1.5;
const DEEP_PAGE_TARGET = 1.2;
const UPSERT_UPDATES = BULK_PRODUCT_ROWS / 2;

interface Bench {
  db: Db;
  baseUrl: string;
  key: string;
  sellerId: string;
  primaryLocationId: string;
  productIds: string[];
}

const log = (line: string) => process.stdout.write(`${line}\n`);

/** Seeds PRODUCTS single-variant products for one seller, with stock at its primary location, set-based. */
async function seed(db: Db, sellerId: string, locationId: string): Promise<string[]> {
  const stem = `${timeOrderedBody().slice(0, 10)}${randomString(6, '0123456789abcdefghjkmnpqrstvwxyz')}`;
  await db.raw(
    `INSERT INTO products (id, seller_id, title, handle, status, description)
     SELECT 'prod_' || ? || lpad(i::text, 10, '0'), ?, 'Bench product ' || i, 'bench-product-' || i,
            (ARRAY['draft', 'proposed', 'published', 'rejected'])[1 + i % 4], 'Seeded for the benchmark'
       FROM generate_series(1, ?::int) AS i`,
    [stem, sellerId, PRODUCTS],
  );
  await db.raw(
    `INSERT INTO variants (id, offer_id, product_id, seller_id, sku, options, price)
     SELECT 'var_' || ? || lpad(i::text, 10, '0'), 'off_' || ? || lpad(i::text, 10, '0'),
            'prod_' || ? || lpad(i::text, 10, '0'), ?, 'BENCH-' || lpad(i::text, 6, '0'), '{"Default":"Default"}',
            1000 + i % 50000
       FROM generate_series(1, ?::int) AS i`,
    [stem, stem, stem, sellerId, PRODUCTS],
  );
  await db.raw(
    `INSERT INTO stock_levels (variant_id, location_id, level)
     SELECT 'var_' || ? || lpad(i::text, 10, '0'), ?, i % 40 FROM generate_series(1, ?::int) AS i`,
    [stem, locationId, PRODUCTS],
  );
  await db.raw('ANALYZE products, variants, stock_levels');
  return Array.from({ length: PRODUCTS }, (_, i) => `prod_${stem}${String(i + 1).padStart(10, '0')}`);
}

/** A batch of 500 distinct SKUs in random order, each with a new on_hand and price_iqd. */
function batch(): Array<{ external_sku: string; on_hand: number; price_iqd: number }> {
  const picked = new Set<number>();
  while (picked.size < BULK_INVENTORY_ROWS) picked.add(1 + Math.floor(Math.random() * PRODUCTS));
  return [...picked].map((i) => ({
    external_sku: `BENCH-${String(i).padStart(6, '0')}`,
    on_hand: Math.floor(Math.random() * 100),
    price_iqd: 1000 + Math.floor(Math.random() * 100_000),
  }));
}

/**
 * Runs `a` and `b` WARMUP times each unmeasured, then ITERATIONS times each, alternating, so that
 * both see the same background load; returns both lists of times in ms.
 */
async function measurePair(a: () => Promise<void>, b: () => Promise<void>): Promise<[number[], number[]]> {
  for (let i = 0; i < WARMUP; i++) {
    await a();
    await b();
  }
  const times: [number[], number[]] = [[], []];
  for (let i = 0; i < ITERATIONS; i++) {
    for (const [fn, out] of [
      [a, times[0]],
      [b, times[1]],
    ] as const) {
      const start = performance.now();
      await fn();
      out.push(performance.now() - start);
    }
  }
  return times;
}

/** One keep-alive socket for every measured request. */
const client = benchHttpClient(1);

/** Sends a request and returns its JSON body, which must come with 200. */
async function fetchOk(url: string, init: { method?: string; headers: Record<string, string>; body?: string }) {
  const { status, text } = await client.request(url, init);
  if (status !== 200) throw new Error(`${init.method ?? 'GET'} ${url} answered ${status}: ${text}`);
  return JSON.parse(text);
}

/** The bulk route: one 500-row PATCH per call, each under a new Idempotency-Key. */
function bulkRoute(b: Bench): () => Promise<void> {
  return async () => {
    const body = await fetchOk(`${b.baseUrl}/partner/v1/inventory/bulk`, {
      method: 'PATCH',
      headers: {
        authorization: `Bearer ${b.key}`,
        'content-type': 'application/json',
        'idempotency-key': randomString(24),
      },
      body: JSON.stringify({ items: batch() }),
    });
    if (body.results.some((r: { status: string }) => r.status !== 'accepted'))
      throw new Error('a bench row was rejected');
  };
}

/** The floor: the same 500-row update (stock at the primary location and list price, by SKU) as one statement. */
function rawFloor(b: Bench, pg: PgClient): () => Promise<void> {
  return async () => {
    const rows = batch();
    await pg.query(
      `WITH u AS (
         SELECT * FROM unnest($1::text[], $2::numeric[], $3::bigint[]) AS u(sku, on_hand, price)
       ), stock AS (
         UPDATE stock_levels sl SET level = u.on_hand, updated_at = now()
           FROM variants v JOIN u ON u.sku = v.sku
          WHERE v.seller_id = $4 AND sl.variant_id = v.id AND sl.location_id = $5
       )
       UPDATE variants v SET price = u.price, updated_at = now() FROM u WHERE v.seller_id = $4 AND v.sku = u.sku`,
      [
        rows.map((r) => r.external_sku),
        rows.map((r) => r.on_hand),
        rows.map((r) => r.price_iqd),
        b.sellerId,
        b.primaryLocationId,
      ],
    );
  };
}

/** A products batch: UPSERT_UPDATES existing SKUs get a new title and description, the rest are new products. */
function upsertBatch() {
  const picked = new Set<number>();
  while (picked.size < UPSERT_UPDATES) picked.add(1 + Math.floor(Math.random() * PRODUCTS));
  const tag = randomString(8);
  return {
    updates: [...picked].map((i) => ({
      external_sku: `BENCH-${String(i).padStart(6, '0')}`,
      title: `Bench product ${i} (${tag})`,
      description: `Updated by the benchmark, ${tag}`,
    })),
    creates: Array.from({ length: BULK_PRODUCT_ROWS - UPSERT_UPDATES }, (_, i) => ({
      external_sku: `NEW-${tag}-${i}`,
      title: `New bench product ${tag} ${i}`,
      price_iqd: 1000 + i,
      initial_stock: 5,
    })),
  };
}

/** The products bulk route: one 50-row POST per call, each under a new Idempotency-Key. */
function upsertRoute(b: Bench): () => Promise<void> {
  return async () => {
    const { updates, creates } = upsertBatch();
    const body = await fetchOk(`${b.baseUrl}/partner/v1/products/bulk`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${b.key}`,
        'content-type': 'application/json',
        'idempotency-key': randomString(24),
      },
      body: JSON.stringify({ items: [...updates, ...creates] }),
    });
    if (body.results.some((r: { status: string }) => r.status !== 'accepted'))
      throw new Error('a bench product row was rejected');
  };
}

/**
 * The products floor: the same batch as one statement (the updates by SKU, a published product
 * back to proposed; each new product with its Default variant and its stock at the primary location).
 */
function upsertFloor(b: Bench, pg: PgClient): () => Promise<void> {
  return async () => {
    const { updates, creates } = upsertBatch();
    const ids = creates.map(() => ({ product: newId('prod'), variant: newId('var'), offer: newId('off') }));
    await pg.query(
      `WITH u AS (
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) AS u(sku, title, description)
       ), upd AS (
         UPDATE products p SET title = u.title, description = u.description,
                status = CASE WHEN p.status = 'published' THEN 'proposed' ELSE p.status END, updated_at = now()
           FROM variants v JOIN u ON u.sku = v.sku
          WHERE v.seller_id = $4 AND p.id = v.product_id AND p.seller_id = $4
       ), n AS (
         SELECT * FROM unnest($5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::bigint[],
                              $12::numeric[]) AS n(product_id, variant_id, offer_id, sku, title, handle, price, stock)
       ), p AS (
         INSERT INTO products (id, seller_id, title, handle, status, description)
         SELECT product_id, $4, title, handle, 'draft', '' FROM n
       ), v AS (
         INSERT INTO variants (id, offer_id, product_id, seller_id, sku, options, price)
         SELECT variant_id, offer_id, product_id, $4, sku, $13::jsonb, price FROM n
       )
       INSERT INTO stock_levels (variant_id, location_id, level) SELECT variant_id, $14, stock FROM n`,
      [
        updates.map((r) => r.external_sku),
        updates.map((r) => r.title),
        updates.map((r) => r.description),
        b.sellerId,
        ids.map((i) => i.product),
        ids.map((i) => i.variant),
        ids.map((i) => i.offer),
        creates.map((r) => r.external_sku),
        creates.map((r) => r.title),
        creates.map((r) => productHandle(r.title)),
        creates.map((r) => r.price_iqd),
        creates.map((r) => r.initial_stock),
        JSON.stringify(defaultVariantOptions),
        b.primaryLocationId,
      ],
    );
  };
}

/** `GET /products?limit=100`, the first page or the one after `afterIndex`; checks it starts where it should. */
function page(b: Bench, afterIndex: number | null): () => Promise<void> {
  const cursor = afterIndex === null ? '' : `&cursor=${encodeProductsCursor(b.productIds[afterIndex])}`;
  const expectedFirst = b.productIds[(afterIndex ?? b.productIds.length) - 1];
  return async () => {
    const body = await fetchOk(`${b.baseUrl}/partner/v1/products?limit=${PAGE_LIMIT}${cursor}`, {
      headers: { authorization: `Bearer ${b.key}` },
    });
    if (body.data.length !== PAGE_LIMIT || body.data[0].id !== expectedFirst)
      throw new Error('the page is not the expected one');
  };
}

const median = (times: number[]) => percentile(times, 50);
const ms = (n: number) => `${n.toFixed(1)} ms`;

/** A server to create the bench database on: DATABASE_URL's, or a durable embedded Postgres. */
async function server(): Promise<{ adminUrl: string; stop(): Promise<void> }> {
  if (process.env.DATABASE_URL) return { adminUrl: process.env.DATABASE_URL, stop: async () => undefined };
  const dataDir = join(process.env.DATA_DIR ?? join(repoRoot, '.data'), 'bench-pg');
  log(`DATABASE_URL is not set: starting embedded Postgres in ${dataDir}`);
  const pg: EmbeddedPg = await startEmbeddedPg({ dataDir, port: await freePort(), durable: true, timeoutMs: 120_000 });
  return { adminUrl: pg.url('postgres'), stop: () => pg.stop() };
}

async function main(): Promise<void> {
  setLogLevel('silent');
  const host = await server();
  const database = `svc_bench_${Date.now()}`;
  const admin = new PgClient({ connectionString: host.adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${database}`);
  const url = new URL(host.adminUrl);
  url.pathname = `/${database}`;
  const db = createDb(url.toString(), 10, bulkLoadDeadlines);
  const pg = new PgClient({ connectionString: url.toString() });
  let close = async () => undefined as void;
  try {
    await migrateLatest(db);
    const seller = await createSeller(db, { name: 'Bench seller', locations: 1 });
    const { key } = await createPartnerKey(db, { sellerId: seller.seller_id, env: 'test', scopes: [...partnerScopes] });
    let started = performance.now();
    const productIds = await seed(db, seller.seller_id, seller.locations[0].id);
    log(
      `Seeded ${PRODUCTS.toLocaleString('en')} products in ${((performance.now() - started) / 1000).toFixed(1)} s (database ${database}).`,
    );

    // The bulk limit (60 per 600 s) would refuse the measured requests; its counter still runs on each one.
    const settings = loadSettings({
      DATABASE_URL: url.toString(),
      LOG_LEVEL: 'silent',
      PARTNER_BULK_RATE_LIMIT: '1000000',
    });
    const app = createApp({ db, settings, clock: systemClock, temporal: new TemporalClient() });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    close = () => new Promise<void>((resolve) => server.close(() => resolve()));
    await pg.connect();
    const bench: Bench = {
      db,
      baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      key,
      sellerId: seller.seller_id,
      primaryLocationId: seller.locations[0].id,
      productIds,
    };

    started = performance.now();
    log(`Measuring (${WARMUP} warm-up + ${ITERATIONS} measured runs each, each pair alternating)...`);
    const [bulk, floor] = await measurePair(bulkRoute(bench), rawFloor(bench, pg));
    // 99% of the way down (the 991st of 1,000 pages at the default size), and always a full page.
    const deepAfter = Math.max(PAGE_LIMIT, Math.floor(PRODUCTS * 0.01));
    const pages = Math.ceil(PRODUCTS / PAGE_LIMIT);
    const deepPage = Math.floor((PRODUCTS - deepAfter) / PAGE_LIMIT) + 1;
    const [first, deep] = await measurePair(page(bench, null), page(bench, deepAfter));
    // Last: the new products it makes would move the pages.
    const [upsert, upsertSql] = await measurePair(upsertRoute(bench), upsertFloor(bench, pg));
    log(`Measured in ${((performance.now() - started) / 1000).toFixed(1)} s.\n`);

    const bulkRatio = median(bulk) / median(floor);
    const upsertRatio = median(upsert) / median(upsertSql);
    const deepRatio = median(deep) / median(first);
    const pass = (ok: boolean) => (ok ? 'pass' : 'FAIL');
    log(
      table([
        ['figure', 'value', 'floor', 'ratio', 'target', 'result'],
        [
          'PATCH /inventory/bulk, 500 rows: median',
          ms(median(bulk)),
          ms(median(floor)),
          `${bulkRatio.toFixed(2)}x`,
          `<= ${BULK_TARGET}x`,
          pass(bulkRatio <= BULK_TARGET),
        ],
        [
          'PATCH /inventory/bulk, 500 rows: p95',
          ms(percentile(bulk, 95)),
          ms(percentile(floor, 95)),
          `${(percentile(bulk, 95) / percentile(floor, 95)).toFixed(2)}x`,
          '-',
          '-',
        ],
        [
          `POST /products/bulk, ${BULK_PRODUCT_ROWS} rows: median`,
          ms(median(upsert)),
          ms(median(upsertSql)),
          `${upsertRatio.toFixed(2)}x`,
          '-',
          '-',
        ],
        [
          `POST /products/bulk, ${BULK_PRODUCT_ROWS} rows: p95`,
          ms(percentile(upsert, 95)),
          ms(percentile(upsertSql, 95)),
          `${(percentile(upsert, 95) / percentile(upsertSql, 95)).toFixed(2)}x`,
          '-',
          '-',
        ],
        ['GET /products?limit=100, first page: median', ms(median(first)), '-', '-', '-', '-'],
        [
          `GET /products?limit=100, deep page (${deepPage} of ${pages.toLocaleString('en')}): median`,
          ms(median(deep)),
          ms(median(first)),
          `${deepRatio.toFixed(2)}x`,
          `<= ${DEEP_PAGE_TARGET}x`,
          pass(deepRatio <= DEEP_PAGE_TARGET),
        ],
      ]),
    );
    const allPass = bulkRatio <= BULK_TARGET && deepRatio <= DEEP_PAGE_TARGET;
    log(
      `\n${PRODUCTS.toLocaleString('en')} products, Node ${process.version}, Postgres ${(await pg.query('SHOW server_version')).rows[0].server_version}.`,
    );
    if (STRICT && !allPass) process.exitCode = 1;
  } finally {
    client.close();
    await close();
    await pg.end().catch(() => undefined);
    await db.destroy();
    if (KEEP) log(`Kept database ${database}.`);
    else await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.end();
    await host.stop();
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
