import type { Client as PgClient } from 'pg';
import { packPayload } from '../../src/checkout/event-payload';
import { randomString, timeOrderedBody } from '../../src/lib/ids';

/**
 * A year of data in SQL for `npm run bench:scale`: every count multiplied by `scale`, 80 % of each
 * table on the big merchant (or seller) and the rest spread over the other tenants. Runs on one
 * connection with `session_replication_role = replica` (no triggers, no foreign-key checks: the
 * rows are made consistent by construction), each table one `INSERT … SELECT generate_series`.
 */
export interface PreloadTenants {
  bigMerchantId: string;
  otherMerchantIds: string[];
  bigSellerId: string;
  bigLocationId: string;
  otherSellers: Array<{ id: string; locationId: string }>;
  /** A session object as the API returns it: the payload of each preloaded event. */
  sessionTemplate: unknown;
}

/** The counts at SCALE=1 (the issue's "a year of data"). */
export const preloadCounts = {
  events: 5_000_000,
  sessions: 1_000_000,
  attempts: 1_200_000,
  idempotencyRecords: 2_000_000,
  products: 200_000,
  variantsPerProduct: 5,
  orders: 500_000,
} as const;

/** Distinct packed payloads the events preload cycles through. */
const PAYLOAD_VARIANTS = 512;

/** Lower-case Crockford base32 of a millisecond time, 10 characters: the clock part of our ids (src/lib/ids.ts). */
const BASE32_FUNCTION = `
CREATE OR REPLACE FUNCTION bench_b32(ms bigint) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT string_agg(substr('0123456789abcdefghjkmnpqrstvwxyz', ((ms >> (5 * (9 - d))) & 31)::int + 1, 1), '' ORDER BY d)
    FROM generate_series(0, 9) AS d
$$`;

/** Loads every table, printing how long each took. */
export async function preload(
  pg: PgClient,
  t: PreloadTenants,
  scale: number,
  log: (line: string) => void,
): Promise<void> {
  const n = (count: number) => Math.max(1, Math.round(count * scale));
  const merchants = [t.bigMerchantId, ...t.otherMerchantIds];
  const sellers = [{ id: t.bigSellerId, locationId: t.bigLocationId }, ...t.otherSellers];
  // Row i belongs to the big tenant unless i % 5 = 0 (20 %), then to one of the others.
  const tenantOf = (i: string) =>
    `CASE WHEN ${i} % 5 <> 0 THEN $1::text ELSE ($2::text[])[1 + (${i} / 5) % array_length($2::text[], 1)] END`;
  const merchantParams = [t.bigMerchantId, merchants.slice(1).length ? merchants.slice(1) : [t.bigMerchantId]];
  const others = sellers.slice(1).length ? sellers.slice(1) : [sellers[0]];
  const sellerParams = [t.bigSellerId, others.map((s) => s.id)];
  const locationParams = [t.bigLocationId, others.map((s) => s.locationId)];

  await pg.query(BASE32_FUNCTION);
  await pg.query(`SET session_replication_role = replica`);
  await pg.query(`SET maintenance_work_mem = '256MB'`);
  const step = async (name: string, sql: string, params: unknown[]) => {
    const started = Date.now();
    const { rowCount } = await pg.query(sql, params);
    log(`  ${name}: ${(rowCount ?? 0).toLocaleString('en')} rows in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  };

  const events = n(preloadCounts.events);
  const span = 30 * 24 * 3600 * 1000 - 2 * 3600 * 1000; // (now − 30 d, now − 1 h): the fixtures are newer
  // Event i at now − 1 h − span·(events − i)/events: ids in time order, as newId makes them.
  const eventAt = `(extract(epoch FROM now()) * 1000)::bigint - 3600000 - (${span}::bigint * ($4::bigint - i) / $4::bigint)`;
  // Since 20261126020000 the payload is stored compressed (src/checkout/event-payload.ts): each
  // event gets one of PAYLOAD_VARIANTS packed copies of the template, each with its own session id,
  // code, url, reference and times (what differs between real sessions), so sizes are real ones.
  const compressed = (
    await pg.query(
      `SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_name = 'events' AND column_name = 'payload') AS yes`,
    )
  ).rows[0].yes as boolean;
  const template = t.sessionTemplate as Record<string, unknown>;
  const variants = Array.from({ length: PAYLOAD_VARIANTS }, (_, k) => {
    const code = randomString(16).toLowerCase();
    const at = Date.now() - k * 60_000;
    return packPayload({
      ...template,
      id: `cs_test_${timeOrderedBody(at)}`,
      code,
      url: String(template.url ?? '').replace(/[^/]*$/, code),
      reference_id: `order-${randomString(8)}`,
      created_at: new Date(at).toISOString(),
      updated_at: new Date(at + 90_000).toISOString(),
      completed_at: new Date(at + 90_000).toISOString(),
    });
  });
  await step(
    'events',
    `INSERT INTO events (id, merchant_id, mode, type, ${compressed ? 'payload' : 'data_object'}, created_at, dispatched_at)
     SELECT 'evt_test_' || bench_b32(at) || lpad(to_hex(i), 18, '0'), ${tenantOf('i')}, 'test',
            (ARRAY['checkout.session.completed', 'checkout.session.expired', 'payment.attempt.failed', 'refund.succeeded'])[1 + i % 4],
            ${compressed ? `($3::bytea[])[1 + i % ${PAYLOAD_VARIANTS}]` : `jsonb_set($3::jsonb, '{id}', to_jsonb('cs_test_load' || i))`},
            to_timestamp(at / 1000.0), to_timestamp(at / 1000.0)
       FROM generate_series(1, $4::bigint) AS i, LATERAL (SELECT ${eventAt} AS at) AS t`,
    [...merchantParams, compressed ? variants : JSON.stringify(t.sessionTemplate), events],
  );
  // Since 20261126041000 the app writes no tenant on a delivery row (20261127120000 drops the
  // columns); before, both columns were required.
  const { rowCount: tenantRequired } = await pg.query(
    `SELECT 1 FROM information_schema.columns
      WHERE table_name = 'event_deliveries' AND column_name = 'merchant_id' AND is_nullable = 'NO'`,
  );
  const tenant = tenantRequired ? ', merchant_id, mode' : '';
  await step(
    'event_deliveries (one per event)',
    `INSERT INTO event_deliveries (event_id, endpoint_id, generation, attempt_no${tenant}, status_code, delivered_at, created_at)
     SELECT id, 'we_load_' || merchant_id, 0, 1${tenant}, 200, created_at + interval '80 ms', created_at + interval '50 ms'
       FROM events WHERE created_at < now() - interval '50 minutes'`,
    [],
  );
  await step(
    // The queue holds pending rows only (finished ones are deleted): retries of the last three
    // days waiting at a failing endpoint, one event in a thousand.
    'webhook_queue (retries pending: one event in 1,000 of the last 3 days)',
    `INSERT INTO webhook_queue (event_id, endpoint_id, generation, attempt_no, next_attempt_at, created_at)
     SELECT id, 'we_load_' || merchant_id, 0, 4, now() + interval '1 hour', created_at + interval '10 ms'
       FROM events WHERE created_at > now() - interval '3 days' AND created_at < now() - interval '50 minutes'
        AND hashtext(id) % 1000 = 0`,
    [],
  );

  const sessions = n(preloadCounts.sessions);
  await step(
    'checkout_sessions',
    `INSERT INTO checkout_sessions (id, merchant_id, mode, code, status, payment_status, reference_id, amount, currency,
                                    line_items, price_key, payment_method_types, customer, collect, locale, success_url,
                                    metadata, expires_at, completed_at, created_at, updated_at)
     SELECT 'cs_test_load' || lpad(i::text, 10, '0'), ${tenantOf('i')}, 'test', 'load' || md5(i::text),
            (ARRAY['completed', 'expired', 'completed', 'canceled'])[1 + i % 4], CASE WHEN i % 2 = 0 THEN 'paid' ELSE 'unpaid' END,
            'order-' || i, 45000, 'IQD',
            '[{"label":"Shirt","amount":21000,"quantity":2,"type":"charge"},{"label":"Delivery","amount":3000,"type":"shipping"}]',
            md5(i::text), '["test"]', '{"phone":"+9647701234567"}', '{"phone":"none","name":"optional","shipping_address":"none"}',
            'en', 'https://shop.example.com/done', '{"order":"load"}', at + interval '1 day', at + interval '2 minutes', at, at
       FROM generate_series(1, $3::bigint) AS i,
            LATERAL (SELECT now() - interval '2 hours' - (interval '365 days' * ($3::bigint - i) / $3::bigint) AS at) AS t`,
    [...merchantParams, sessions],
  );
  await step(
    'payment_attempts',
    `INSERT INTO payment_attempts (id, session_id, merchant_id, mode, method, gateway, flow, status, presented_amount,
                                   presented_currency, decision, resolved_at, created_at, updated_at)
     SELECT 'pa_test_load' || lpad(i::text, 10, '0'), s.id, s.merchant_id, 'test', 'test', 'test', 'redirect',
            CASE WHEN i % 6 = 0 THEN 'failed' ELSE 'succeeded' END, 45000, 'IQD', 'succeeded', s.created_at + interval '1 minute',
            s.created_at + interval '30 seconds', s.created_at + interval '1 minute'
       FROM generate_series(1, $1::bigint) AS i
       JOIN checkout_sessions s ON s.id = 'cs_test_load' || lpad((1 + (i - 1) % $2::bigint)::text, 10, '0')`,
    [n(preloadCounts.attempts), sessions],
  );
  await step(
    'idempotency_records (24 h)',
    `INSERT INTO idempotency_records (scope, key, route, body_hash, state, response_status, response_body, created_at, completed_at)
     SELECT 'checkout:' || ${tenantOf('i')} || ':test', 'load_' || i, 'POST /v1/checkout/sessions', md5(i::text), 'done', 201,
            json_build_object('id', 'cs_test_load' || i, 'object', 'checkout.session', 'status', 'open', 'amount', 45000,
                              'url', 'https://pay.example.com/c/load' || md5(i::text)),
            now() - interval '23 hours' * ($3::bigint - i) / $3::bigint, now() - interval '23 hours' * ($3::bigint - i) / $3::bigint
       FROM generate_series(1, $3::bigint) AS i`,
    [...merchantParams, n(preloadCounts.idempotencyRecords)],
  );

  const products = n(preloadCounts.products);
  // Product ids are time-ordered and lists read them newest first: a year of products is older
  // than today's fixtures (ids that sort before any of this era's, '00…'), so the first page shows
  // the same products on the empty and the loaded database and the two figures compare the same work.
  const perProduct = preloadCounts.variantsPerProduct;
  await step(
    'products',
    `INSERT INTO products (id, seller_id, title, handle, status, description, created_at, updated_at)
     SELECT 'prod_00load' || lpad(i::text, 10, '0'), ${tenantOf('i')}, 'Loaded product ' || i, 'loaded-product-' || i,
            (ARRAY['draft', 'proposed', 'published', 'rejected'])[1 + i % 4], 'Preloaded for bench:scale', now(), now()
       FROM generate_series(1, $3::bigint) AS i`,
    [...sellerParams, products],
  );
  await step(
    'variants',
    `INSERT INTO variants (id, offer_id, product_id, seller_id, sku, options, price, variant_count)
     SELECT 'var_load' || lpad(v::text, 11, '0'), 'off_load' || lpad(v::text, 11, '0'), 'prod_00load' || lpad(p::text, 10, '0'),
            ${tenantOf('p')}, 'LOAD-' || p || '-' || k, jsonb_build_object('Size', 'S' || k), 1000 + v % 50000, $4::int
       FROM generate_series(1, $3::bigint) AS p, generate_series(1, $4::int) AS k, LATERAL (SELECT (p - 1) * $4::int + k AS v) AS x`,
    [...sellerParams, products, perProduct],
  );
  await step(
    'stock_levels',
    `INSERT INTO stock_levels (variant_id, location_id, level)
     SELECT 'var_load' || lpad(((p - 1) * $4::int + k)::text, 11, '0'), ${tenantOf('p')}, (p + k) % 40
       FROM generate_series(1, $3::bigint) AS p, generate_series(1, $4::int) AS k`,
    [...locationParams, products, perProduct],
  );
  const orders = n(preloadCounts.orders);
  await step(
    'orders',
    `INSERT INTO orders (id, seller_id, increment_id, status, total, shipping_address, created_at, updated_at)
     SELECT 'ord_load' || lpad(i::text, 10, '0'), ${tenantOf('i')}, 'L' || lpad(i::text, 10, '0'),
            (ARRAY['pending', 'accepted', 'shipped', 'delivered'])[1 + i % 4], 45000,
            '{"first_name":"Zaid","last_name":"Ali","city":"Baghdad","line1":"Street 1"}', at, at
       FROM generate_series(1, $3::bigint) AS i,
            LATERAL (SELECT now() - interval '2 hours' - (interval '365 days' * ($3::bigint - i) / $3::bigint) AS at) AS t`,
    [...sellerParams, orders],
  );
  await step(
    'settlements',
    `INSERT INTO settlements (order_id, seller_id, status, commission_percent, commission_amount, earnings, hold_days, created_at)
     SELECT id, seller_id, 'held', 10, 4500, 40500, 7, created_at FROM orders WHERE id LIKE 'ord_load%'`,
    [],
  );
  await pg.query(`SET session_replication_role = origin`);
}
