import { randomBytes } from 'node:crypto';
import { Client as PgClient } from 'pg';
import { createDb } from '../src/db/knex';
import { createMerchant } from '../src/ops/merchants';
import { createSeller } from '../src/ops/sellers';
import { preload } from './bench/preload';
import { scratchDatabase } from './bench/environment';

/**
 * `npm run bench:migrate`: this release's migrations on a loaded database, with writers going on.
 * Creates `svc_migrate_<ts>` on DATABASE_URL's server, migrates it up to the last migration of the
 * previous release (RELEASED), preloads it as bench:scale does (SCALE, default 0.2: 1 M events with
 * their delivery and queue rows, 200 k sessions, 40 k products with 200 k variants, 100 k orders),
 * runs `VACUUM ANALYZE`, then applies each new migration while, every 20 ms, a writer inserts an
 * event with its delivery and queue row and a variant into a loaded product (the previous
 * release's SQL), and a reader reads a product and the newest event. Prints each migration's time
 * and the writer's and reader's worst latency (a call still waiting counts) and errors meanwhile.
 * The database is dropped at the end (BENCH_KEEP=1 keeps it).
 */

const RELEASED = '20261124170000_variant_counts';
const SCALE = Number(process.env.SCALE ?? 0.2);
const WRITE_EVERY_MS = 20;

const log = (line: string) => process.stdout.write(`${line}\n`);
const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** Our id clock: lower-case Crockford base32 of the epoch milliseconds, 10 characters. */
function idClock(ms: number): string {
  const alphabet = '0123456789abcdefghjkmnpqrstvwxyz';
  return Array.from({ length: 10 }, (_, d) => alphabet[Math.floor(ms / 2 ** (5 * (9 - d))) % 32]).join('');
}

/** Runs `work` every WRITE_EVERY_MS until stopped; keeps the worst latency and the errors. */
function startLoop(pg: PgClient, work: () => Promise<void>) {
  let worst = 0;
  let errors: string[] = [];
  let writes = 0;
  let running = true;
  let inFlightSince: number | undefined;
  const loop = (async () => {
    while (running) {
      const started = performance.now();
      inFlightSince = started;
      try {
        await work();
        writes += 1;
      } catch (err) {
        await pg.query('ROLLBACK').catch(() => undefined);
        errors.push(err instanceof Error ? err.message : String(err));
      }
      worst = Math.max(worst, performance.now() - started);
      inFlightSince = undefined;
      await new Promise((resolve) => setTimeout(resolve, WRITE_EVERY_MS));
    }
  })();
  return {
    /** The worst latency (a write still waiting counts as long as it has waited) and the errors since the last call, then starts over. */
    take: () => {
      const waiting = inFlightSince === undefined ? 0 : performance.now() - inFlightSince;
      const out = { worst: Math.max(worst, waiting), errors, writes };
      worst = 0;
      errors = [];
      writes = 0;
      return out;
    },
    stop: async () => {
      running = false;
      await loop;
    },
  };
}

/** One write with the previous release's statements: an event with its delivery and queue row, and a variant. */
async function writeAsBefore(pg: PgClient, productId: string, merchantId: string): Promise<void> {
  const id = `evt_test_${idClock(Date.now())}${randomBytes(9).toString('hex')}`;
  await pg.query('BEGIN');
  await pg.query(
    `INSERT INTO events (id, merchant_id, mode, type, data_object, created_at)
     VALUES ($1, $2, 'test', 'checkout.session.completed', '{}'::jsonb, now())`,
    [id, merchantId],
  );
  await pg.query(
    `INSERT INTO event_deliveries (event_id, endpoint_id, generation, attempt_no, merchant_id, mode, status_code)
     VALUES ($1, 'we_load', 0, 1, $2, 'test', 200)`,
    [id, merchantId],
  );
  await pg.query(`INSERT INTO webhook_queue (event_id, endpoint_id, generation) VALUES ($1, 'we_load', 0)`, [id]);
  await pg.query(
    `INSERT INTO variants (id, offer_id, product_id, seller_id, sku, options, price)
     SELECT $1, $1, id, seller_id, $1, '{}'::jsonb, 1000 FROM products WHERE id = $2`,
    [`var_mig_${id}`, productId],
  );
  await pg.query('COMMIT');
}

async function main(): Promise<void> {
  const scratch = await scratchDatabase('svc_migrate', 'bench:migrate');
  const database = scratch.name;
  const db = createDb(scratch.url, 4);
  const pg = new PgClient({ connectionString: scratch.url });
  const writerPg = new PgClient({ connectionString: scratch.url });
  const readerPg = new PgClient({ connectionString: scratch.url });
  try {
    log(`Migrating ${database} up to ${RELEASED} (the previous release)...`);
    for (;;) {
      const [, names] = (await db.migrate.up()) as [number, string[]];
      if (names.length === 0 || names.some((n) => n.startsWith(RELEASED))) break;
    }
    await pg.connect();
    // Real tenants (the writer's rows are checked by their foreign keys); the preload's are not.
    const merchant = await createMerchant(db, { name: 'Load', returnHosts: ['shop.example.com'], testMerchant: true });
    const seller = await createSeller(db, { name: 'Load', locations: 1 });
    log(`Preloading at SCALE=${SCALE}...`);
    const started = performance.now();
    await preload(
      pg,
      {
        bigMerchantId: merchant.merchant_id,
        otherMerchantIds: [merchant.merchant_id],
        bigSellerId: seller.seller_id,
        bigLocationId: seller.locations[0].id,
        otherSellers: [{ id: seller.seller_id, locationId: seller.locations[0].id }],
        sessionTemplate: { id: 'cs_test_template', object: 'checkout.session', amount: 45000, currency: 'IQD' },
      },
      SCALE,
      log,
    );
    await pg.query('SET session_replication_role = origin');
    await pg.query('VACUUM ANALYZE');
    log(`  preloaded and vacuumed in ${secs(performance.now() - started)}`);
    const { rows: sizes } = await pg.query(
      `SELECT relname, pg_size_pretty(pg_total_relation_size(oid)) AS size FROM pg_class
        WHERE relname IN ('events', 'event_deliveries', 'webhook_queue', 'variants', 'products') ORDER BY relname`,
    );
    log(`  sizes: ${sizes.map((r: { relname: string; size: string }) => `${r.relname} ${r.size}`).join(', ')}`);

    const { rows: product } = await pg.query(`SELECT id FROM products ORDER BY id LIMIT 1`);
    await writerPg.connect();
    const writer = startLoop(writerPg, () => writeAsBefore(writerPg, product[0].id, merchant.merchant_id));
    await readerPg.connect();
    const reader = startLoop(readerPg, async () => {
      await readerPg.query('SELECT id, title FROM products WHERE id = $1', [product[0].id]);
      await readerPg.query(`SELECT id FROM events ORDER BY created_at DESC LIMIT 1`);
    });
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const [quiet, quietReads] = [writer.take(), reader.take()];
    log(`\nBefore: writer worst ${quiet.worst.toFixed(0)} ms, reader worst ${quietReads.worst.toFixed(0)} ms`);
    log('\nmigration                                   time      writer worst  writes  errors  reader worst  reads');
    for (;;) {
      const before = performance.now();
      const [, names] = (await db.migrate.up()) as [number, string[]];
      if (names.length === 0) break;
      const took = performance.now() - before;
      const [w, r] = [writer.take(), reader.take()];
      const ms = (x: number) => `${x.toFixed(0)} ms`.padStart(12);
      log(
        `${names.join(',').padEnd(43)} ${secs(took).padStart(8)}  ${ms(w.worst)}  ${String(w.writes).padStart(6)}  ${String(w.errors.length).padStart(6)}  ${ms(r.worst)}  ${String(r.writes).padStart(5)}`,
      );
      for (const e of [...new Set([...w.errors, ...r.errors])].slice(0, 3)) log(`    error: ${e}`);
    }
    await Promise.all([writer.stop(), reader.stop()]);
  } finally {
    await Promise.allSettled([db.destroy(), pg.end(), writerPg.end(), readerPg.end()]);
    await scratch.drop();
  }
}

main().catch((err) => {
  process.stderr.write(`bench:migrate failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
