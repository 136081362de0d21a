import { cpus } from 'node:os';
import { performance } from 'node:perf_hooks';
import { Client as PgClient } from 'pg';
import { createJanitorActivities } from '../activities/janitor';
import { packPayload } from '../src/checkout/event-payload';
import { createDb, migrateLatest } from '../src/db/knex';
import { checkoutScopes, partnerScopes } from '../src/keys/scopes';
import { randomString, timeOrderedBody } from '../src/lib/ids';
import { setLogLevel } from '../src/lib/log';
import { createCheckoutKey } from '../src/ops/checkout-keys';
import { createMerchant } from '../src/ops/merchants';
import { createPartnerKey } from '../src/ops/partner-keys';
import { createSeller } from '../src/ops/sellers';
import { encodeProductsCursor } from '../src/partner/params';
import { BULK_INVENTORY_ROWS, BULK_PRODUCT_ROWS } from '../src/partner/schemas';
import {
  type CpuGroups,
  databaseBackends,
  meterCpu,
  profileClockUs,
  waitForQuietMachine,
  writeProfileWindow,
} from './bench/cpu';
import { startBenchEnvironment, temporalCpuGroups } from './bench/environment';
import { benchHttpClient } from './bench/http-client';
import { percentile, table } from './bench/measure';
import { explainStatements, type RoutePlans, slowestPlanLines, startPlanRecorder } from './bench/plans';
import { preload, preloadCounts } from './bench/preload';
import { journeySessionBody } from './bench/sessions';
import { benchServiceEnv, startWorkerAndApi } from './bench/services';
import { scrape, sumLines } from './processes';

/**
 * `npm run bench:scale`: the main routes on an empty database and again on a year of data. On a
 * database and a `temporal server start-dev` of its own, with the API and the worker as child
 * processes (as `npm run api` and `npm run worker` run them), it measures each route over HTTP
 * (one request at a time on one keep-alive socket), preloads the tables with SQL (SCALE=1: 5 M
 * events with a delivery row each and their pending retries queued, 1 M sessions, 1.2 M attempts, 2 M idempotency
 * records, 200 k products with 1 M variants and their stock, 500 k orders; SCALE multiplies every
 * count, 0.05 for a quick run), runs VACUUM ANALYZE, and measures the same routes with the same
 * fixtures again. Each route's empty figure is its floor: the table prints loaded ÷ empty for p50
 * and p95. Then the table and index sizes, the bytes an event costs (events, deliveries and queue
 * rows with their indexes, divided by the events), and one janitor sweep at a steady 100 events/s
 * (an hour of them, 360 k × SCALE, past retention): its time, its longest statement and the worst
 * wait of a writer probing the event tables meanwhile.
 *
 * BENCH_ITERATIONS (60) and BENCH_WARMUP (10) per route; BENCH_STRICT=1 exits 1 when a target is
 * missed (p95 ratio ≤ 1.2 for reads and lists, ≤ 1.3 for session create and the journey, ≤ 1.5
 * for the bulk writes; the sweep ≤ 1 s with no statement or wait over 100 ms; ≤ 1 KB per event).
 * Uses DATABASE_URL's server (a database `svc_bench_<ts>`, dropped at the end), or an embedded one.
 * It prints each process's CPU in both phases; BENCH_CPU_PROF_DIR has the API and the worker write
 * CPU profiles, with each phase's window (`tsx scripts/bench/cpu-profile.ts --whole <dir> 30
 * window-loaded.json`: self time per route run).
 */

const SCALE = Number(process.env.SCALE ?? 1);
const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 60);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 10);
const JOURNEYS = Number(process.env.BENCH_JOURNEYS ?? 20);
const STRICT = process.env.BENCH_STRICT === '1';
const NAMESPACE = 'default';
const FIXTURE_EVENTS = 2_500;
const FIXTURE_PRODUCTS = 2_500;
const FIXTURE_ORDERS = 500;
const OTHER_TENANTS = 20;
/** An hour at a steady 100 events/s: what one hourly sweep purges. */
const SWEEP_EVENTS = Math.max(1, Math.round(360_000 * SCALE));
const TARGETS = { read: 1.2, create: 1.3, bulk: 1.5, sweepMs: 1000, lockMs: 100, bytesPerEvent: 1024 };

const log = (line: string) => process.stdout.write(`${line}\n`);
const secs = (since: number) => `${((performance.now() - since) / 1000).toFixed(1)} s`;
const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Route {
  name: string;
  kind: keyof typeof TARGETS;
  run: () => Promise<void>;
  iterations?: number;
}

async function main(): Promise<void> {
  setLogLevel('silent');
  const env = await startBenchEnvironment('scale', NAMESPACE, log);
  try {
    const db = createDb(env.databaseUrl, 4);
    env.onClose(() => db.destroy());
    await migrateLatest(db);
    const pg = new PgClient({ connectionString: env.databaseUrl });
    await pg.connect();
    env.onClose(() => pg.end());

    const { baseUrl, serviceEnv: common } = await benchServiceEnv(env, 'scale', NAMESPACE);
    const serviceEnv: NodeJS.ProcessEnv = {
      ...common,
      CHECKOUT_RATE_LIMIT_PER_SECOND: '1000000',
      PARTNER_BULK_RATE_LIMIT: '1000000',
      TRUST_PROXY: '1',
    };
    const { worker, api } = await startWorkerAndApi(env, 'scale', serviceEnv, baseUrl, log);
    // Who spent the CPU while the routes were measured: a route slower on the loaded database with
    // the same time in Postgres was slowed by something else (the worker, the host).
    const cpuGroups: CpuGroups = {
      API: async () => [api.pid!],
      worker: async () => [worker.pid!],
      'Postgres (bench database backends)': () => databaseBackends(db),
      ...temporalCpuGroups(env.temporal),
    };
    // The same routes through an in-process app on the same settings, whose statements are recorded
    // and planned (EXPLAIN ANALYZE) after each measurement: where a route's time goes in Postgres.
    const recorder = await startPlanRecorder(env, serviceEnv);
    // The API the routes call: the child process, or the recorder's app while a route's statements are recorded.
    let target = baseUrl;

    // Tenants: the big merchant and seller, and OTHER_TENANTS of each for the rest of the preload.
    const merchant = await createMerchant(db, {
      name: 'Big merchant',
      returnHosts: ['shop.example.com'],
      methods: ['test'],
      testMerchant: true,
    });
    const [secret, publishable] = await Promise.all(
      (['secret', 'publishable'] as const).map((type) =>
        createCheckoutKey(db, { merchantId: merchant.merchant_id, mode: 'test', type, scopes: [...checkoutScopes] }),
      ),
    );
    const seller = await createSeller(db, { name: 'Big seller', locations: 1 });
    const partner = await createPartnerKey(db, { sellerId: seller.seller_id, env: 'test', scopes: [...partnerScopes] });
    const otherMerchantIds: string[] = [];
    const otherSellers: Array<{ id: string; locationId: string }> = [];
    for (let i = 0; i < OTHER_TENANTS; i++) {
      const m = await createMerchant(db, {
        name: `Merchant ${i}`,
        returnHosts: ['shop.example.com'],
        methods: ['test'],
      });
      otherMerchantIds.push(m.merchant_id);
      const s = await createSeller(db, { name: `Seller ${i}`, locations: 1 });
      otherSellers.push({ id: s.seller_id, locationId: s.locations[0].id });
    }

    const client = benchHttpClient(1);
    env.onClose(async () => client.close());
    const call = async (path: string, expected: number, init: { method?: string; key: string; body?: unknown }) => {
      const headers: Record<string, string> = { authorization: `Bearer ${init.key}` };
      if (init.body !== undefined) {
        headers['content-type'] = 'application/json';
        headers['idempotency-key'] = `bench_${randomString(24)}`;
      }
      const { status, text } = await client.request(`${target}${path}`, {
        method: init.method,
        headers,
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
      });
      if (status !== expected) throw new Error(`${init.method ?? 'GET'} ${path} answered ${status}: ${text}`);
      return JSON.parse(text);
    };
    const sessionBody = (reference: string) => ({ ...journeySessionBody(reference), metadata: { order: 'bench' } });

    // Fixtures, the same for both measurements: sessions by the API, events, products and orders by SQL.
    log('Creating the fixtures...');
    const fixtureSession = await call('/v1/checkout/sessions', 201, {
      method: 'POST',
      key: secret.key,
      body: sessionBody('fixture-order'),
    });
    const stem = timeOrderedBody().slice(0, 10);
    await pg.query(
      `INSERT INTO events (id, merchant_id, mode, type, payload, created_at, dispatched_at)
       SELECT 'evt_test_' || $1 || lpad(i::text, 18, '0'), $2, 'test',
              (ARRAY['checkout.session.completed', 'checkout.session.expired'])[1 + i % 2], $3::bytea,
              now() - interval '1 second' * ($4::int - i), now()
         FROM generate_series(1, $4::int) AS i`,
      [stem, merchant.merchant_id, packPayload(fixtureSession), FIXTURE_EVENTS],
    );
    await pg.query(
      `INSERT INTO products (id, seller_id, title, handle, status, description)
       SELECT 'prod_' || $1 || lpad(i::text, 10, '0'), $2, 'Bench product ' || i, 'bench-product-' || i, 'draft', ''
         FROM generate_series(1, $3::int) AS i`,
      [stem, seller.seller_id, FIXTURE_PRODUCTS],
    );
    await pg.query(
      `INSERT INTO variants (id, offer_id, product_id, seller_id, sku, options, price)
       SELECT 'var_' || $1 || lpad(i::text, 10, '0'), 'off_' || $1 || lpad(i::text, 10, '0'), 'prod_' || $1 || lpad(i::text, 10, '0'),
              $2, 'BENCH-' || lpad(i::text, 6, '0'), '{"Default":"Default"}', 1000 + i
         FROM generate_series(1, $3::int) AS i`,
      [stem, seller.seller_id, FIXTURE_PRODUCTS],
    );
    await pg.query(
      `INSERT INTO stock_levels (variant_id, location_id, level)
       SELECT 'var_' || $1 || lpad(i::text, 10, '0'), $2, i % 40 FROM generate_series(1, $3::int) AS i`,
      [stem, seller.locations[0].id, FIXTURE_PRODUCTS],
    );
    await pg.query(
      `WITH o AS (
         INSERT INTO orders (id, seller_id, increment_id, status, total, shipping_address)
         SELECT 'ord_' || $1 || lpad(i::text, 10, '0'), $2, 'F' || $1 || i, 'pending', 45000, '{"first_name":"Zaid"}'
           FROM generate_series(1, $3::int) AS i RETURNING id, seller_id
       )
       INSERT INTO settlements (order_id, seller_id, status, commission_percent, commission_amount, earnings, hold_days)
       SELECT id, seller_id, 'held', 10, 4500, 40500, 7 FROM o`,
      [stem, seller.seller_id, FIXTURE_ORDERS],
    );
    await pg.query('ANALYZE');
    const productIds = Array.from(
      { length: FIXTURE_PRODUCTS },
      (_, i) => `prod_${stem}${String(i + 1).padStart(10, '0')}`,
    );
    // 20 pages of 100 deep, by the cursor the list itself gives.
    let eventsCursor = '';
    for (let p = 0; p < 20; p++) {
      const page = await call(`/v1/events?limit=100${eventsCursor ? `&cursor=${eventsCursor}` : ''}`, 200, {
        key: secret.key,
      });
      eventsCursor = page.next_cursor;
    }
    const productsCursor = encodeProductsCursor(productIds[FIXTURE_PRODUCTS - 19 * 100 - 1]);
    const fixtureEventId = `evt_test_${stem}${String(FIXTURE_EVENTS / 2).padStart(18, '0')}`;

    const inventoryBatch = () => {
      const picked = new Set<number>();
      while (picked.size < BULK_INVENTORY_ROWS) picked.add(1 + Math.floor(Math.random() * FIXTURE_PRODUCTS));
      return [...picked].map((i) => ({
        external_sku: `BENCH-${String(i).padStart(6, '0')}`,
        on_hand: Math.floor(Math.random() * 100),
        price_iqd: 1000 + Math.floor(Math.random() * 100_000),
      }));
    };
    const productsBatch = () => {
      const tag = randomString(8);
      return Array.from({ length: BULK_PRODUCT_ROWS }, (_, i) =>
        i % 2 === 0
          ? {
              external_sku: `BENCH-${String(1 + Math.floor(Math.random() * FIXTURE_PRODUCTS)).padStart(6, '0')}`,
              title: `Bench ${tag}`,
            }
          : {
              external_sku: `NEW-${tag}-${i}`,
              title: `New bench product ${tag} ${i}`,
              price_iqd: 1000 + i,
              initial_stock: 5,
            },
      );
    };
    const browser = (i: number) => ({ 'x-forwarded-for': `10.9.${(i >> 8) & 255}.${i & 255}` });
    let journeys = 0;
    const journey = async () => {
      const session = await call('/v1/checkout/sessions', 201, {
        method: 'POST',
        key: secret.key,
        body: sessionBody(`journey-${randomString(10)}`),
      });
      const code = new URL(session.url).pathname.split('/').pop()!;
      const headers = { authorization: `Bearer ${publishable.key}`, ...browser(journeys++) };
      const pub = async (path: string, method: string, expected: number, body?: unknown) => {
        const { status, text } = await client.request(`${target}${path}`, {
          method,
          headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        if (status !== expected) throw new Error(`${method} ${path} answered ${status}: ${text}`);
        return JSON.parse(text);
      };
      await pub(`/v1/public/sessions/${code}`, 'GET', 200);
      const attempt = await pub(`/v1/public/sessions/${code}/attempts`, 'POST', 201, { method: 'test' });
      await pub(`/v1/public/test-gateway/${attempt.attempt_id}/decide`, 'POST', 200, { decision: 'succeeded' });
      for (;;) {
        // On a loaded machine the poll can outrun the browser's rate limit (300 a minute): wait it out.
        const poll = await client.request(`${target}/v1/public/attempts/${attempt.attempt_id}`, {
          method: 'GET',
          headers,
        });
        if (poll.status === 429) {
          await sleep(1000);
          continue;
        }
        if (poll.status !== 200) throw new Error(`GET attempt answered ${poll.status}: ${poll.text}`);
        const state = JSON.parse(poll.text);
        if (state.status === 'succeeded') break;
        if (state.status !== 'pending') throw new Error(`the attempt ended ${state.status}`);
        await sleep(20);
      }
    };

    const get =
      (path: string, key = secret.key) =>
      async () =>
        void (await call(path, 200, { key }));
    const routes: Route[] = [
      { name: 'GET /v1/checkout/sessions/{id}', kind: 'read', run: get(`/v1/checkout/sessions/${fixtureSession.id}`) },
      {
        name: 'GET /v1/checkout/sessions?reference_id=',
        kind: 'read',
        run: get('/v1/checkout/sessions?reference_id=fixture-order'),
      },
      {
        name: 'POST /v1/checkout/sessions',
        kind: 'create',
        run: async () =>
          void (await call('/v1/checkout/sessions', 201, {
            method: 'POST',
            key: secret.key,
            body: sessionBody(`bench-${randomString(12)}`),
          })),
      },
      { name: 'GET /v1/events?limit=100 (first page)', kind: 'read', run: get('/v1/events?limit=100') },
      {
        name: 'GET /v1/events?type=…&limit=100',
        kind: 'read',
        run: get('/v1/events?limit=100&type=checkout.session.expired'),
      },
      {
        name: 'GET /v1/events?limit=100 (21st page, cursor)',
        kind: 'read',
        run: get(`/v1/events?limit=100&cursor=${eventsCursor}`),
      },
      { name: 'GET /v1/events/{id}', kind: 'read', run: get(`/v1/events/${fixtureEventId}`) },
      {
        name: 'GET /partner/v1/products?limit=100',
        kind: 'read',
        run: get('/partner/v1/products?limit=100', partner.key),
      },
      {
        name: 'GET /partner/v1/products (20th page)',
        kind: 'read',
        run: get(`/partner/v1/products?limit=100&cursor=${productsCursor}`, partner.key),
      },
      {
        name: 'GET /partner/v1/products/{sku}',
        kind: 'read',
        run: get('/partner/v1/products/BENCH-001234', partner.key),
      },
      { name: 'GET /partner/v1/orders?limit=200', kind: 'read', run: get('/partner/v1/orders?limit=200', partner.key) },
      {
        name: `PATCH /partner/v1/inventory/bulk (${BULK_INVENTORY_ROWS} rows)`,
        kind: 'bulk',
        run: async () =>
          void (await call('/partner/v1/inventory/bulk', 200, {
            method: 'PATCH',
            key: partner.key,
            body: { items: inventoryBatch() },
          })),
      },
      {
        name: `POST /partner/v1/products/bulk (${BULK_PRODUCT_ROWS} rows)`,
        kind: 'bulk',
        run: async () =>
          void (await call('/partner/v1/products/bulk', 200, {
            method: 'POST',
            key: partner.key,
            body: { items: productsBatch() },
          })),
      },
      { name: 'attempt journey (create → paid)', kind: 'create', run: journey, iterations: JOURNEYS },
    ];

    // The API's heap and garbage collection (its own metrics): a process that grows collects longer.
    const apiMemory = async () => {
      const text = await scrape(`http://127.0.0.1:${serviceEnv.METRICS_PORT}/metrics`);
      const sum = (name: string) => sumLines(text, (line) => line.startsWith(name)) ?? 0;
      return {
        heapMb: sum('svc_nodejs_heap_size_used_bytes') / 2 ** 20,
        gcS: sum('svc_nodejs_gc_duration_seconds_sum'),
      };
    };
    const measureAll = async (phase: 'empty' | 'loaded') => {
      const memoryBefore = await apiMemory();
      const meter = await meterCpu(cpuGroups, 'this script (client)', 'other processes on the machine');
      const wallStarted = performance.now();
      const startUs = profileClockUs();
      const out = new Map<string, number[]>();
      let runs = 0;
      for (const route of routes) {
        const iterations = route.iterations ?? ITERATIONS;
        for (let i = 0; i < Math.min(WARMUP, iterations); i++) await route.run();
        runs += Math.min(WARMUP, iterations) + iterations;
        const times: number[] = [];
        for (let i = 0; i < iterations; i++) {
          const t0 = performance.now();
          await route.run();
          times.push(performance.now() - t0);
        }
        out.set(route.name, times);
      }
      if (process.env.BENCH_CPU_PROF_DIR) {
        // The phase's window for `cpu-profile.ts --whole <dir> <top> window-<phase>.json`: per route run.
        const window = { startUs, endUs: profileClockUs(), count: runs };
        writeProfileWindow(process.env.BENCH_CPU_PROF_DIR, `window-${phase}.json`, window);
      }
      const cpu = await meter.stop();
      const memoryAfter = await apiMemory();
      const memory = {
        heapBeforeMb: memoryBefore.heapMb,
        heapAfterMb: memoryAfter.heapMb,
        gcS: memoryAfter.gcS - memoryBefore.gcS,
      };
      return { times: out, cpu, memory, wallS: (performance.now() - wallStarted) / 1000 };
    };
    /** Each route once more through the recorder's app, its statements planned. */
    const planAll = async () => {
      const out = new Map<string, RoutePlans>();
      for (const route of routes) {
        target = recorder.baseUrl;
        let statements;
        try {
          statements = await recorder.record(route.run);
        } finally {
          target = baseUrl;
        }
        out.set(route.name, await explainStatements(pg, statements));
      }
      return out;
    };

    let started = performance.now();
    log(`Measuring on the empty database (${WARMUP} warm-up + ${ITERATIONS} runs per route)...`);
    const emptyRun = await measureAll('empty');
    const empty = emptyRun.times;
    const emptyPlans = await planAll();
    log(`  in ${secs(started)}`);

    started = performance.now();
    log(`Preloading at SCALE=${SCALE}...`);
    await preload(
      pg,
      {
        bigMerchantId: merchant.merchant_id,
        otherMerchantIds,
        bigSellerId: seller.seller_id,
        bigLocationId: seller.locations[0].id,
        otherSellers,
        sessionTemplate: fixtureSession,
      },
      SCALE,
      log,
    );
    log(`  preloaded in ${secs(started)}`);
    started = performance.now();
    await pg.query('VACUUM ANALYZE');
    log(`  VACUUM ANALYZE in ${secs(started)}`);
    // The preload's gigabytes are still being written back (the kernel's page cache, Postgres's
    // checkpoint) for minutes: the loaded routes are measured once that is done, as the empty ones were.
    started = performance.now();
    await pg.query('CHECKPOINT');
    const quiet = await waitForQuietMachine();
    log(
      `  CHECKPOINT, then ${quiet.quiet ? 'the machine quiet' : 'the machine still busy'} after ${secs(started)} ` +
        `(idle ${(quiet.idle * 100).toFixed(0)} % of the last second)`,
    );

    started = performance.now();
    log('Measuring on the loaded database...');
    const loadedRun = await measureAll('loaded');
    const loaded = loadedRun.times;
    const loadedPlans = await planAll();
    log(`  in ${secs(started)}`);

    let allPass = true;
    const verdict = (ok: boolean) => {
      if (!ok) allPass = false;
      return ok ? 'pass' : 'FAIL';
    };
    const f = (n: number) => n.toFixed(1);
    log('');
    log(
      table([
        ['route', 'empty p50', 'loaded p50', 'ratio', 'empty p95', 'loaded p95', 'ratio', 'target', 'result'],
        ...routes.map((r) => {
          const [e, l] = [empty.get(r.name)!, loaded.get(r.name)!];
          const p95 = percentile(l, 95) / percentile(e, 95);
          return [
            r.name,
            `${f(percentile(e, 50))} ms`,
            `${f(percentile(l, 50))} ms`,
            `${(percentile(l, 50) / percentile(e, 50)).toFixed(2)}x`,
            `${f(percentile(e, 95))} ms`,
            `${f(percentile(l, 95))} ms`,
            `${p95.toFixed(2)}x`,
            `p95 <= ${TARGETS[r.kind]}x`,
            verdict(p95 <= TARGETS[r.kind]),
          ];
        }),
      ]),
    );

    // Where each route's time goes: its statements' execution in Postgres (one request, EXPLAIN
    // ANALYZE) against its p50 over HTTP; for a route that missed, the plan of its slowest statement
    // on both databases (BENCH_PLANS=all: every route's).
    log(
      '\nTime in Postgres per request (the statements of one request under EXPLAIN ANALYZE, summed: planning, execution):',
    );
    log(
      table([
        ['route', 'statements', 'empty: plan + run / p50', 'loaded: plan + run / p50'],
        ...routes.map((r) => {
          const [e, l] = [emptyPlans.get(r.name)!, loadedPlans.get(r.name)!];
          return [
            r.name,
            String(l.statements.length),
            `${f(e.planningMs)} + ${f(e.executionMs)} / ${f(percentile(empty.get(r.name)!, 50))} ms`,
            `${f(l.planningMs)} + ${f(l.executionMs)} / ${f(percentile(loaded.get(r.name)!, 50))} ms`,
          ];
        }),
      ]),
    );
    log('\nCPU while the routes were measured (each phase its own wall time; cores busy = CPU s ÷ wall s):');
    const loadedCpu = new Map(loadedRun.cpu);
    log(
      table([
        ['process', 'empty: CPU s', 'cores busy', 'loaded: CPU s', 'cores busy'],
        ...emptyRun.cpu.map(([name, seconds]) => [
          name,
          seconds.toFixed(1),
          (seconds / emptyRun.wallS).toFixed(2),
          (loadedCpu.get(name) ?? 0).toFixed(1),
          ((loadedCpu.get(name) ?? 0) / loadedRun.wallS).toFixed(2),
        ]),
        ['wall', `${emptyRun.wallS.toFixed(1)} s`, '', `${loadedRun.wallS.toFixed(1)} s`, ''],
        [
          'API garbage collection',
          `${emptyRun.memory.gcS.toFixed(2)} s`,
          '',
          `${loadedRun.memory.gcS.toFixed(2)} s`,
          '',
        ],
        ...(['heapBeforeMb', 'heapAfterMb'] as const).map((k) => [
          `API heap used, ${k === 'heapBeforeMb' ? 'before' : 'after'}`,
          `${emptyRun.memory[k].toFixed(0)} MB`,
          '',
          `${loadedRun.memory[k].toFixed(0)} MB`,
          '',
        ]),
      ]),
    );
    const missed = routes.filter(
      (r) => percentile(loaded.get(r.name)!, 95) / percentile(empty.get(r.name)!, 95) > TARGETS[r.kind],
    );
    for (const r of process.env.BENCH_PLANS === 'all' ? routes : missed) {
      log(`\n${r.name}: the slowest statement on the empty database`);
      for (const line of slowestPlanLines(emptyPlans.get(r.name)!)) log(line);
      log(`${r.name}: the slowest statement on the loaded database`);
      for (const line of slowestPlanLines(loadedPlans.get(r.name)!)) log(line);
    }

    // Sizes: a partitioned table's figures are the sum over its partitions.
    const sizes = await pg.query(
      `WITH t AS (
         SELECT c.oid, c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
       )
       SELECT t.relname AS name,
              sum(pg_table_size(p.relid))::bigint AS table_bytes, sum(pg_indexes_size(p.relid))::bigint AS index_bytes,
              count(*) AS partitions, sum(greatest(c.reltuples, 0))::bigint AS rows
         FROM t
         JOIN LATERAL (SELECT relid FROM pg_partition_tree(t.oid) WHERE isleaf AND t.relkind = 'p'
                       UNION ALL SELECT t.oid WHERE t.relkind = 'r') p ON true
         JOIN pg_class c ON c.oid = p.relid
        GROUP BY t.oid, t.relname ORDER BY sum(pg_total_relation_size(p.relid)) DESC LIMIT 14`,
    );
    log('\nTables (largest first; partitioned ones summed over their partitions):');
    log(
      table([
        ['table', 'rows (estimate)', 'table', 'indexes', 'partitions'],
        ...sizes.rows.map((r) => [
          r.name,
          Number(r.rows).toLocaleString('en'),
          mb(Number(r.table_bytes)),
          mb(Number(r.index_bytes)),
          String(r.partitions),
        ]),
      ]),
    );
    const eventCount = Number((await pg.query('SELECT count(*) AS n FROM events')).rows[0].n);
    const part = (name: string) => sizes.rows.find((r) => r.name === name) ?? { table_bytes: 0, index_bytes: 0 };
    const parts: Array<[string, number]> = [
      ['events heap', Number(part('events').table_bytes)],
      ['events indexes', Number(part('events').index_bytes)],
      [
        'event_deliveries heap + indexes',
        Number(part('event_deliveries').table_bytes) + Number(part('event_deliveries').index_bytes),
      ],
      [
        'webhook_queue heap + indexes',
        Number(part('webhook_queue').table_bytes) + Number(part('webhook_queue').index_bytes),
      ],
    ];
    const perEvent = parts.reduce((sum, [, bytes]) => sum + bytes, 0) / eventCount;
    log(
      `\nBytes per event (events, event_deliveries and webhook_queue with their indexes ÷ ${eventCount.toLocaleString('en')} events): ` +
        `${perEvent.toFixed(0)} B (target <= ${TARGETS.bytesPerEvent} B: ${verdict(perEvent <= TARGETS.bytesPerEvent)})`,
    );
    log(table([['part', 'bytes per event'], ...parts.map(([name, bytes]) => [name, (bytes / eventCount).toFixed(0)])]));
    // Each partition's index under the partitioned index it is attached to.
    const indexes = await pg.query(
      `SELECT pg_partition_root(i.indexrelid)::regclass::text AS name, sum(pg_relation_size(i.indexrelid))::bigint AS bytes
         FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid
        WHERE t.relispartition AND pg_partition_root(t.oid) IN ('events'::regclass, 'event_deliveries'::regclass)
        GROUP BY 1 ORDER BY 2 DESC`,
    );
    log(
      table([
        ['index (over its partitions)', 'bytes per event'],
        ...indexes.rows.map((r) => [r.name, (Number(r.bytes) / eventCount).toFixed(0)]),
      ]),
    );

    // One sweep at a steady 100 events/s: an hour of events (with their rows) past retention.
    log(
      `\nJanitor: ${SWEEP_EVENTS.toLocaleString('en')} events past retention (an hour at 100/s × SCALE), one sweep...`,
    );
    const janitorDb = createDb(env.databaseUrl, 2);
    env.onClose(() => janitorDb.destroy());
    const sweep = createJanitorActivities({ db: janitorDb });
    await sweep.sweepRetention({ nowMs: Date.now() }); // whatever the preload left past retention
    // On the partitioned log, that day's partitions (older than the migration made).
    if ((await pg.query(`SELECT to_regproc('event_log_ensure_day') IS NOT NULL AS p`)).rows[0].p) {
      await pg.query(`SELECT event_log_ensure_day((now() AT TIME ZONE 'UTC' - interval '32 days')::date)`);
    }
    await pg.query(`SET session_replication_role = replica`);
    await pg.query(
      `INSERT INTO events (id, merchant_id, mode, type, data_object, created_at, dispatched_at)
       SELECT 'evt_test_' || bench_b32(at) || lpad(to_hex(i), 18, '0'), $1, 'test', 'checkout.session.completed',
              jsonb_set($2::jsonb, '{id}', to_jsonb('cs_test_old' || i)), to_timestamp(at / 1000.0), to_timestamp(at / 1000.0)
         FROM generate_series(1, $3::bigint) AS i,
              LATERAL (SELECT (extract(epoch FROM now() - interval '32 days') * 1000)::bigint + 3600000 * i / $3::bigint AS at) AS t`,
      [merchant.merchant_id, JSON.stringify(fixtureSession), SWEEP_EVENTS],
    );
    const old = `FROM events WHERE created_at < now() - interval '31 days'`;
    await pg.query(
      `INSERT INTO event_deliveries (event_id, endpoint_id, generation, attempt_no, status_code, delivered_at, created_at)
       SELECT id, 'we_old', 0, 1, 200, created_at, created_at ${old}`,
    );
    await pg.query(`SET session_replication_role = origin`);
    await pg.query('VACUUM ANALYZE events, event_deliveries, webhook_queue');

    // The longest statement of the sweep, and the worst wait of a writer meanwhile (an event with
    // its delivery and queue row every 20 ms, as the app writes them).
    let longestStatement = 0;
    const startedAt = new Map<unknown, number>();
    janitorDb.on('query', (q: { __knexQueryUid: string }) => startedAt.set(q.__knexQueryUid, performance.now()));
    janitorDb.on('query-response', (_r: unknown, q: { __knexQueryUid: string }) => {
      longestStatement = Math.max(longestStatement, performance.now() - (startedAt.get(q.__knexQueryUid) ?? 0));
    });
    const probe = new PgClient({ connectionString: env.databaseUrl });
    await probe.connect();
    env.onClose(() => probe.end());
    let probing = true;
    let worstProbe = 0;
    const probeSql = `WITH e AS (
        INSERT INTO events (id, merchant_id, mode, type, data_object) VALUES ($1, $2, 'test', 'checkout.session.completed', '{}')
        RETURNING id
      ), d AS (
        INSERT INTO event_deliveries (event_id, endpoint_id, generation, attempt_no)
        SELECT id, 'we_probe', 0, 1 FROM e
      )
      INSERT INTO webhook_queue (event_id, endpoint_id, generation) SELECT id, 'we_probe', 0 FROM e`;
    const probing$ = (async () => {
      while (probing) {
        const t0 = performance.now();
        await probe.query(probeSql, [`evt_test_${timeOrderedBody()}`, merchant.merchant_id]);
        worstProbe = Math.max(worstProbe, performance.now() - t0);
        await sleep(20);
      }
    })();
    await sleep(200);
    const quietProbe = worstProbe;
    const t0 = performance.now();
    const result = await sweep.sweepRetention({ nowMs: Date.now() });
    const sweepMs = performance.now() - t0;
    await sleep(100);
    probing = false;
    await probing$;
    const left = Number(
      (await pg.query(`SELECT count(*) AS n FROM events WHERE created_at < now() - interval '31 days'`)).rows[0].n,
    );
    log(
      table([
        ['figure', 'value', 'target', 'result'],
        ['sweep time', `${sweepMs.toFixed(0)} ms`, `<= ${TARGETS.sweepMs} ms`, verdict(sweepMs <= TARGETS.sweepMs)],
        [
          'longest statement of the sweep',
          `${longestStatement.toFixed(0)} ms`,
          `<= ${TARGETS.lockMs} ms`,
          verdict(longestStatement <= TARGETS.lockMs),
        ],
        [
          'worst event write during the sweep',
          `${worstProbe.toFixed(0)} ms (quiet: ${quietProbe.toFixed(0)} ms)`,
          `<= ${TARGETS.lockMs} ms`,
          verdict(worstProbe <= TARGETS.lockMs),
        ],
        ['events past retention left', String(left), '0', verdict(left === 0)],
      ]),
    );
    log(`  sweep result: ${JSON.stringify(result)}`);

    const version = (await pg.query('SHOW server_version')).rows[0].server_version;
    log(
      `\nSCALE=${SCALE}; Node ${process.version}, Postgres ${version}, ${cpus().length} CPUs (a shared machine: ` +
        'each empty figure is the floor of its loaded one, measured in the same run).',
    );
    log(`Preload counts at SCALE=1: ${JSON.stringify(preloadCounts)}`);
    if (STRICT && !allPass) process.exitCode = 1;
  } finally {
    await env.close();
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
