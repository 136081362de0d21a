import { createDb, migrateUpTo, migrateUpToBefore } from '../src/db/knex';
import { createMerchant } from '../src/ops/merchants';
import { recordAttempts } from '../src/webhooks/record';
import { scratchDatabase } from './scratch-database';
import { bulkLoadDeadlines } from '../src/db/deadlines';

/**
 * `npx tsx scripts/bench-undelivered-backfill.ts`: the backfill of `webhook_undelivered`
 * (migrations/20261126050000_undelivered_backfill.ts) on a loaded database while the recorder
 * goes on. Creates `svc_bfbench_<ts>` on DATABASE_URL's server, migrates it up to just before
 * the list existed, writes DELIVERIES attempt rows (default 100,000) over 35 days for 20 endpoints
 * of 4 merchants (per ten events: six delivered, one failed then delivered, one delivered then a
 * failed redelivery, two failed only) and EXTRA events without deliveries (default 0), migrates
 * up to just before the backfill, then runs it while, every 20 ms, the real recorder
 * (recordAttempts) records an attempt (half of them successes) of a preloaded event within
 * retention. Prints the backfill's time, its longest statement, its longest endpoint transaction
 * (the time it held an endpoint's row), the recorder's worst and p99 latency meanwhile, and
 * whether the list then equals the rule computed over every row at once. Drops the database at the
 * end (BENCH_KEEP=1 keeps it).
 */

const DELIVERIES = Number(process.env.DELIVERIES ?? 100_000);
const EXTRA = Number(process.env.EXTRA ?? 0);
const WRITE_EVERY_MS = 20;
const DAY = 86_400_000;
const log = (line: string) => process.stdout.write(`${line}\n`);

/** The rule (src/webhooks/record.ts) over every row at once: the pairs the list must hold. */
const RULE_SQL = `
  SELECT d.event_id, d.endpoint_id FROM event_deliveries d
    JOIN events e ON e.id = d.event_id AND e.created_at >= (SELECT cutoff FROM event_log_retention)
   WHERE EXISTS (SELECT 1 FROM webhook_endpoints w WHERE w.id = d.endpoint_id)
   GROUP BY d.event_id, d.endpoint_id
  HAVING bool_or(d.error IS NOT NULL AND (d.delivered_at IS NOT NULL OR d.error = 'endpoint_disabled'))
     AND NOT bool_or(d.error IS NULL)`;

async function main(): Promise<void> {
  const scratch = await scratchDatabase('svc_bfbench', 'bench-undelivered-backfill');
  const db = createDb(scratch.url, 4, bulkLoadDeadlines);
  const writerDb = createDb(scratch.url, 2);
  try {
    await migrateUpTo(db, '20261125115000');
    const merchants: string[] = [];
    for (let m = 0; m < 4; m++) {
      merchants.push(
        (await createMerchant(db, { name: `Bench ${m}`, returnHosts: ['shop.example.com'], testMerchant: true }))
          .merchant_id,
      );
    }
    const endpoints = merchants.flatMap((merchantId, m) =>
      Array.from({ length: 5 }, (_, k) => ({
        id: `we_test_bench${m}_${k}`,
        merchant_id: merchantId,
        mode: 'test',
        url: 'https://hooks.example.com/in',
        events: JSON.stringify(['*']),
        status: 'enabled',
        secret_ciphertext: 'unused',
      })),
    );
    await db('webhook_endpoints').insert(endpoints);
    const events = Math.round(DELIVERIES / 1.5);
    const now = Date.now();
    const started = performance.now();
    await db.raw(`
      CREATE FUNCTION bench_b32(ms bigint) RETURNS text LANGUAGE sql IMMUTABLE AS $$
        SELECT string_agg(substr('0123456789abcdefghjkmnpqrstvwxyz', ((ms >> (5 * (9 - d))) & 31)::int + 1, 1), '' ORDER BY d)
          FROM generate_series(0, 9) AS d
      $$`);
    // Event i at now - 35 days * i / n; merchant i % 4; endpoint (i / 4) % 5 of it; pattern i % 10.
    await db.raw(
      `CREATE TABLE bench_events AS
         SELECT i, 'evt_test_' || bench_b32(t) || substr(md5(i::text), 1, 18) AS id,
                (?::text[])[1 + i % 4] AS merchant_id, 'we_test_bench' || (i % 4) || '_' || ((i / 4) % 5) AS endpoint_id,
                to_timestamp(t / 1000.0) AS at
           FROM generate_series(1, ?) AS i, LATERAL (SELECT (?::bigint - 35::bigint * ? * i / ?)::bigint AS t) AS x`,
      [merchants, events, now, DAY, events],
    );
    await db.raw(
      `INSERT INTO events (id, merchant_id, mode, type, data_object, created_at, dispatched_at)
       SELECT id, merchant_id, 'test', 'checkout.session.completed', '{}'::jsonb, at, at FROM bench_events`,
    );
    // Events without deliveries (the rest of a larger log), spread over the same 35 days.
    await db.raw(
      `INSERT INTO events (id, merchant_id, mode, type, data_object, created_at, dispatched_at)
       SELECT 'evt_test_' || bench_b32(t) || substr(md5('x' || j), 1, 18), (?::text[])[1 + j % 4], 'test',
              'checkout.session.completed', '{}'::jsonb, to_timestamp(t / 1000.0), to_timestamp(t / 1000.0)
         FROM generate_series(1, ?) AS j, LATERAL (SELECT (?::bigint - 35::bigint * ? * j / ?)::bigint AS t) AS x`,
      [merchants, EXTRA, now, DAY, Math.max(EXTRA, 1)],
    );
    await db.raw(
      `INSERT INTO event_deliveries (event_id, endpoint_id, generation, attempt_no, merchant_id, mode, status_code, error, delivered_at)
       SELECT e.id, e.endpoint_id, a.generation, a.attempt_no, e.merchant_id, 'test', a.status,
              CASE WHEN a.status = 200 THEN NULL ELSE 'http_' || a.status END, e.at
         FROM bench_events e
         JOIN (VALUES
           (0, 1, 200, 0), (1, 1, 200, 1), (2, 1, 200, 2), (3, 1, 200, 3), (4, 1, 200, 4), (5, 1, 200, 5),
           (6, 1, 500, 0), (6, 2, 200, 0),
           (7, 1, 500, 0), (7, 2, 503, 0), (7, 3, 500, 0),
           (8, 1, 200, 0), (8, 1, 500, 9),
           (9, 1, 500, 0), (9, 2, 500, 0)
         ) AS a(pattern, attempt_no, status, generation) ON a.pattern = e.i % 10`,
    );
    const { rows: counts } = await db.raw(
      `SELECT (SELECT count(*) FROM events)::int AS events, (SELECT count(*) FROM event_deliveries)::int AS deliveries`,
    );
    log(
      `${scratch.name}: ${counts[0].events} events, ${counts[0].deliveries} deliveries written in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );

    await migrateUpToBefore(db, '20261126050000');
    await db('event_log_retention').update({ cutoff: new Date(now - 30 * DAY) });
    await db.raw('VACUUM ANALYZE');
    const expected = (await db.raw(RULE_SQL)).rows.length;
    log(`pairs the rule lists before the run: ${expected}`);

    // The recorder, on its own pool, every 20 ms: an attempt of an event within retention.
    const { rows: live } = await db.raw(
      `SELECT id, merchant_id, endpoint_id FROM bench_events WHERE at >= now() - interval '29 days'`,
    );
    const latencies: number[] = [];
    /** When (performance.now()) each recorded attempt started, beside its latency. */
    const startedAts: number[] = [];
    let running = true;
    let generation = 1_000_000;
    let errors = 0;
    const writer = (async () => {
      while (running) {
        const e = live[Math.floor(Math.random() * live.length)];
        const ok = Math.random() < 0.5;
        const t0 = performance.now();
        try {
          await recordAttempts(
            writerDb,
            e.endpoint_id,
            [
              {
                eventId: e.id,
                generation: generation++,
                attemptNo: 1,
                event: { merchant_id: e.merchant_id, mode: 'test' },
                statusCode: ok ? 200 : 500,
                error: ok ? null : 'http_500',
                attempted: true,
              },
            ],
            Date.now(),
          );
        } catch {
          errors++;
        }
        latencies.push(performance.now() - t0);
        startedAts.push(t0);
        await new Promise((resolve) => setTimeout(resolve, WRITE_EVERY_MS));
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const quiet = latencies.splice(0);
    startedAts.splice(0);

    // Statement times and each transaction's span, from knex's query events.
    const startedAt = new Map<string, number>();
    const spans = new Map<string, { first: number; last: number }>();
    let longestStatement = { ms: 0, sql: '', nth: 0 };
    let statements = 0;
    db.on('query', (q: { __knexQueryUid: string; __knexTxId?: string }) => {
      startedAt.set(q.__knexQueryUid, performance.now());
      if (q.__knexTxId && !spans.has(q.__knexTxId)) {
        spans.set(q.__knexTxId, { first: performance.now(), last: performance.now() });
      }
    });
    db.on('query-response', (_r: unknown, q: { __knexQueryUid: string; __knexTxId?: string; sql: string }) => {
      const ms = performance.now() - (startedAt.get(q.__knexQueryUid) ?? performance.now());
      statements += 1;
      if (ms > longestStatement.ms) {
        longestStatement = { ms, sql: q.sql.replace(/\s+/g, ' ').slice(0, 60), nth: statements };
      }
      const span = q.__knexTxId ? spans.get(q.__knexTxId) : undefined;
      if (span) span.last = performance.now();
    });
    const t0 = performance.now();
    const [, applied] = (await db.migrate.up()) as [number, string[]];
    const took = performance.now() - t0;
    db.removeAllListeners('query');
    db.removeAllListeners('query-response');
    running = false;
    await writer;

    const worstAt = startedAts[latencies.indexOf(Math.max(...latencies))] - t0;
    const during = [...latencies].sort((a, b) => a - b);
    const p99 = during[Math.floor(during.length * 0.99)] ?? 0;
    // Knex's own migration transactions are in `spans` too; they are shorter than the endpoints'.
    const txs = [...spans.values()].map((s) => s.last - s.first);
    const longestTx = Math.max(0, ...txs);
    const medianTx = [...txs].sort((a, b) => a - b)[Math.floor(txs.length / 2)] ?? 0;
    const listed = (await db.raw(`SELECT count(*)::int AS n FROM webhook_undelivered`)).rows[0].n;
    const { rows: diff } = await db.raw(
      `SELECT (SELECT count(*) FROM (${RULE_SQL} EXCEPT SELECT event_id, endpoint_id FROM webhook_undelivered) a)::int AS missing,
              (SELECT count(*) FROM (SELECT event_id, endpoint_id FROM webhook_undelivered EXCEPT ${RULE_SQL}) b)::int AS extra`,
    );
    log(`applied: ${applied.join(', ')}`);
    log(`backfill: ${(took / 1000).toFixed(2)} s for ${counts[0].deliveries} deliveries (${spans.size} transactions)`);
    log(
      `longest statement: ${longestStatement.ms.toFixed(1)} ms (the ${longestStatement.nth}th of ${statements}: ${longestStatement.sql}…)`,
    );
    log(
      `endpoint transactions (row held FOR SHARE): longest ${longestTx.toFixed(1)} ms (the ${txs.indexOf(longestTx) + 1}th), median ${medianTx.toFixed(1)} ms`,
    );
    log(
      `recorder: before worst ${Math.max(0, ...quiet).toFixed(1)} ms; during ${during.length} attempts, worst ${(during.at(-1) ?? 0).toFixed(1)} ms (${(worstAt / 1000).toFixed(2)} s into the run), p99 ${p99.toFixed(1)} ms, ${errors} errors`,
    );
    log(`list: ${listed} rows; against the rule over every row: ${diff[0].missing} missing, ${diff[0].extra} extra`);
  } finally {
    await Promise.allSettled([db.destroy(), writerDb.destroy()]);
    await scratch.drop();
  }
}

main().catch((err) => {
  process.stderr.write(`bench-undelivered-backfill failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
