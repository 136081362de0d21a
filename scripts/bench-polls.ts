import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Client as TemporalClient } from '@temporalio/client';
import { createApp } from '../src/app';
import { loadSettings } from '../src/config';
import { createDb, Db, migrateLatest } from '../src/db/knex';
import { systemClock } from '../src/lib/clock';
import { randomString } from '../src/lib/ids';
import { setLogLevel } from '../src/lib/log';
import { createCheckoutKey } from '../src/ops/checkout-keys';
import { createMerchant } from '../src/ops/merchants';
import { benchHttpClient } from './bench/http-client';
import { percentile, table } from './bench/measure';
import { scratchDatabase } from './scratch-database';
import { bulkLoadDeadlines } from '../src/db/deadlines';

/**
 * `npm run bench:polls`: the two attempt polls the return page repeats while a payment settles,
 * `GET /v1/public/sessions/{code}/attempts/{id}` and `GET /v1/public/attempts/{id}`, over HTTP
 * against the real app (in process) on a database of its own, beside three ways of reading the
 * attempt with its session and merchant, measured in the same run on the same pool:
 *
 * - one statement (the join), also the floor: what the poll cannot do with fewer round trips;
 * - two statements under READ COMMITTED (the reads as they were before issue 21: two moments);
 * - the same two statements in one REPEATABLE READ READ ONLY transaction (one moment, two more round trips).
 *
 * Half the attempts are settled (`succeeded`, session `completed`), half pending with a button
 * pressed (so no poll asks the workflow to verify: no Temporal is needed). Every measured call runs
 * once per round, in turn, so all see the same background load. Uses DATABASE_URL's server (a
 * database `svc_bench_<ts>` is created and dropped). BENCH_SESSIONS, BENCH_ITERATIONS and
 * BENCH_WARMUP change the sizes.
 */

const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 1000);
const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 1000);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 200);

const log = (line: string) => process.stdout.write(`${line}\n`);

interface Pair {
  code: string;
  attemptId: string;
}

/** A merchant with a publishable test key, and SESSIONS sessions each with one test attempt, set-based. */
async function seed(db: Db): Promise<{ key: string; merchantId: string; pairs: Pair[] }> {
  const { merchant_id: merchantId } = await createMerchant(db, {
    name: 'Bench shop',
    returnHosts: ['shop.example.com'],
    contactEmail: 'ops@shop.example.com',
    methods: ['test'],
    testMerchant: true,
  });
  const { key } = await createCheckoutKey(db, { merchantId, mode: 'test', type: 'publishable' });
  const stem = randomString(10, '0123456789abcdefghjkmnpqrstvwxyz');
  await db.raw(
    `INSERT INTO checkout_sessions (id, merchant_id, mode, code, status, payment_status, reference_id, amount, currency,
                                    line_items, price_key, payment_method_types, customer, collect, locale, success_url,
                                    cancel_url, expires_at)
     SELECT 'cs_test_' || ? || lpad(i::text, 8, '0'), ?, 'test', 'BENCH' || upper(?) || lpad(i::text, 8, '0'),
            CASE WHEN i % 2 = 0 THEN 'completed' ELSE 'processing' END,
            CASE WHEN i % 2 = 0 THEN 'paid' ELSE 'unpaid' END,
            'order-' || i, 25000, 'IQD', '[{"label":"Order","amount":25000,"quantity":1,"type":"charge"}]', 'bench',
            '["test"]', '{"phone":null,"name":null,"address":null}',
            '{"phone":"none","name":"optional","shipping_address":"none"}', 'en', 'https://shop.example.com/done',
            'https://shop.example.com/cart', now() + interval '1 day'
       FROM generate_series(1, ?::int) AS i`,
    [stem, merchantId, stem, SESSIONS],
  );
  await db.raw(
    `INSERT INTO payment_attempts (id, session_id, merchant_id, mode, method, gateway, flow, status, presented_amount,
                                   presented_currency, decision)
     SELECT 'pa_test_' || ? || lpad(i::text, 8, '0'), 'cs_test_' || ? || lpad(i::text, 8, '0'), ?, 'test', 'test',
            'test', 'redirect', CASE WHEN i % 2 = 0 THEN 'succeeded' ELSE 'pending' END, 25000, 'IQD',
            CASE WHEN i % 2 = 0 THEN 'succeeded' ELSE 'slow' END
       FROM generate_series(1, ?::int) AS i`,
    [stem, stem, merchantId, SESSIONS],
  );
  await db.raw('ANALYZE checkout_sessions, payment_attempts, merchants');
  const pairs = Array.from({ length: SESSIONS }, (_, n) => ({
    code: `BENCH${stem.toUpperCase()}${String(n + 1).padStart(8, '0')}`,
    attemptId: `pa_test_${stem}${String(n + 1).padStart(8, '0')}`,
  }));
  return { key, merchantId, pairs };
}

/** The attempt with its session and the merchant's display, as one statement reads them. */
const JOIN = `SELECT a.*, s.code, s.status AS session_status, s.payment_status, s.success_url, s.cancel_url, s.locale,
                     m.display_name, m.logo_url, m.accent
                FROM payment_attempts a
                JOIN checkout_sessions s ON s.id = a.session_id
                JOIN merchants m ON m.id = a.merchant_id
               WHERE a.id = ? AND a.merchant_id = ? AND a.mode = 'test'`;

/** The reads as two statements: the attempt, then its session. */
async function twoReads(db: Db, merchantId: string, attemptId: string) {
  const attempt = await db('payment_attempts').where({ id: attemptId, merchant_id: merchantId, mode: 'test' }).first();
  const session = await db('checkout_sessions').where({ id: attempt.session_id }).first();
  return { attempt, session };
}

async function main(): Promise<void> {
  setLogLevel('silent');
  const scratch = await scratchDatabase('svc_bench', 'bench:polls');
  const db = createDb(scratch.url, 10, bulkLoadDeadlines);
  const client = benchHttpClient(1);
  let close = async () => undefined as void;
  try {
    await migrateLatest(db);
    const { key, merchantId, pairs } = await seed(db);
    const settings = loadSettings({ DATABASE_URL: scratch.url, LOG_LEVEL: 'silent', TRUST_PROXY: '1' });
    const app = createApp({ db, settings, clock: systemClock, temporal: new TemporalClient() });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    close = () => new Promise<void>((resolve) => server.close(() => resolve()));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/public`;

    let calls = 0;
    const get = async (path: string) => {
      // A client IP per 250 calls keeps every caller under the per-IP limit (300 a minute).
      const ip = `10.9.${Math.floor(calls / 250 / 250) % 250}.${1 + (Math.floor(calls++ / 250) % 250)}`;
      const headers = { authorization: `Bearer ${key}`, 'x-forwarded-for': ip };
      const { status, text } = await client.request(`${base}${path}`, { headers });
      if (status !== 200) throw new Error(`GET ${path} answered ${status}: ${text}`);
    };
    const measured: Array<[string, (p: Pair) => Promise<unknown>]> = [
      ['GET /v1/public/sessions/{code}/attempts/{id}', (p) => get(`/sessions/${p.code}/attempts/${p.attemptId}`)],
      ['GET /v1/public/attempts/{id}', (p) => get(`/attempts/${p.attemptId}`)],
      ['floor: one statement (attempt, session, merchant)', (p) => db.raw(JOIN, [p.attemptId, merchantId])],
      ['two statements, READ COMMITTED', (p) => twoReads(db, merchantId, p.attemptId)],
      [
        'two statements, REPEATABLE READ READ ONLY transaction',
        (p) =>
          db.transaction((trx) => twoReads(trx, merchantId, p.attemptId), {
            isolationLevel: 'repeatable read',
            readOnly: true,
          }),
      ],
    ];
    const times = measured.map(() => [] as number[]);
    log(`Measuring (${WARMUP} warm-up + ${ITERATIONS} measured rounds, each call once per round, in turn)...`);
    for (let round = 0; round < WARMUP + ITERATIONS; round++) {
      const pair = pairs[round % pairs.length];
      for (const [i, [, call]] of measured.entries()) {
        const started = performance.now();
        await call(pair);
        if (round >= WARMUP) times[i].push(performance.now() - started);
      }
    }
    const ms = (n: number) => `${n.toFixed(2)} ms`;
    const floor = times[2];
    log(
      `\n${table([
        ['figure', 'p50', 'p95', 'p50 / floor', 'p95 / floor'],
        ...measured.map(([name], i) => [
          name,
          ms(percentile(times[i], 50)),
          ms(percentile(times[i], 95)),
          `${(percentile(times[i], 50) / percentile(floor, 50)).toFixed(2)}x`,
          `${(percentile(times[i], 95) / percentile(floor, 95)).toFixed(2)}x`,
        ]),
      ])}`,
    );
    const version = (await db.raw('SHOW server_version')).rows[0].server_version;
    log(`\n${SESSIONS.toLocaleString('en')} sessions, Node ${process.version}, Postgres ${version}.`);
  } finally {
    client.close();
    await close();
    await db.destroy();
    await scratch.drop();
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
