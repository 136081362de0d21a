import { randomBytes } from 'node:crypto';
import { Client as PgClient } from 'pg';
import { migrations } from '../migrations';
import { createDb } from '../src/db/knex';
import { migrate } from '../src/db/migrator';
import { createMerchant } from '../src/ops/merchants';
import { createSeller } from '../src/ops/sellers';
import { preload } from './bench/preload';
import { scratchDatabase } from './scratch-database';
import { newestRelease, newMigrations } from './migration-lint';
import { bulkLoadDeadlines } from '../src/db/deadlines';

/**
 * `npm run bench:migrate`: this release's migrations on a loaded database, with writers going on.
 * Creates `svc_migrate_<ts>` on DATABASE_URL's server, migrates it as the previous release left it
 * (every migration of the newest release in releases.tsv), preloads it as bench:scale does (SCALE,
 * default 0.2: 1 M events with their delivery and queue rows, 200 k sessions, 40 k products with
 * 200 k variants, 100 k orders), runs `VACUUM ANALYZE`, then applies each new migration through the
 * runner (src/db/migrator.ts), the expand ones first, then the contract ones, as a release does,
 * while every 20 ms a writer inserts an event with its delivery and queue row and a variant into a
 * loaded product (the statements both releases send), and a reader reads a product and the newest
 * event. Prints each migration's time and tries, and the writer's and reader's worst latency (a
 * call still waiting counts) and errors meanwhile. With LONG_READ_S=n, a transaction holds a
 * reader's lock on those tables for n seconds as each migration starts, which the migration's
 * locks wait for (each try at most its lock_timeout, then again: src/db/migrator.ts). The database is dropped at the end (BENCH_KEEP=1
 * keeps it).
 */

const SCALE = Number(process.env.SCALE ?? 0.2);
const WRITE_EVERY_MS = 20;
/** LONG_READ_S=n: a transaction holds a reader's lock on the written tables for n s as each migration starts (a report query). */
const LONG_READ_MS = Number(process.env.LONG_READ_S ?? 0) * 1000;

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

/** One write as both releases make it: an event with its delivery (no tenant) and queue row, and a variant. */
async function writeAsBefore(pg: PgClient, productId: string, merchantId: string): Promise<void> {
  const id = `evt_test_${idClock(Date.now())}${randomBytes(9).toString('hex')}`;
  await pg.query('BEGIN');
  await pg.query(
    `INSERT INTO events (id, merchant_id, mode, type, data_object, created_at)
     VALUES ($1, $2, 'test', 'checkout.session.completed', '{}'::jsonb, now())`,
    [id, merchantId],
  );
  await pg.query(
    `INSERT INTO event_deliveries (event_id, endpoint_id, generation, attempt_no, status_code)
     VALUES ($1, 'we_load', 0, 1, 200)`,
    [id],
  );
  await pg.query(`INSERT INTO webhook_queue (event_id, endpoint_id, generation) VALUES ($1, 'we_load', 0)`, [id]);
  await pg.query(
    `INSERT INTO variants (id, offer_id, product_id, seller_id, sku, options, price)
     SELECT $1, $1, id, seller_id, $1, '{}'::jsonb, 1000 FROM products WHERE id = $2`,
    [`var_mig_${id}`, productId],
  );
  await pg.query('COMMIT');
}

/** A transaction that reads the tables the writer writes, holding their ACCESS SHARE locks for `ms`. */
function longRead(url: string, ms: number): { started: Promise<void>; done: Promise<void> } {
  const client = new PgClient({ connectionString: url });
  let begun!: () => void;
  const started = new Promise<void>((resolve) => (begun = resolve));
  const done = (async () => {
    await client.connect();
    try {
      await client.query('BEGIN');
      for (const table of ['events', 'event_deliveries', 'webhook_queue', 'variants', 'products']) {
        await client.query(`SELECT 1 FROM ${table} LIMIT 1`);
      }
      begun();
      await new Promise((resolve) => setTimeout(resolve, ms));
      await client.query('COMMIT');
    } finally {
      await client.end();
    }
  })();
  return { started, done };
}

async function main(): Promise<void> {
  const scratch = await scratchDatabase('svc_migrate', 'bench:migrate');
  const database = scratch.name;
  const db = createDb(scratch.url, 4, bulkLoadDeadlines);
  const pg = new PgClient({ connectionString: scratch.url });
  const writerPg = new PgClient({ connectionString: scratch.url });
  const readerPg = new PgClient({ connectionString: scratch.url });
  try {
    const release = newestRelease();
    const { names: fresh, note } = newMigrations(migrations, release);
    if (note) log(`note: ${note}`);
    if (fresh.length === 0) throw new Error(`no migration since release ${release.version}: nothing to measure`);
    log(
      `Migrating ${database} as release ${release.version} left it (${migrations.length - fresh.length} migrations)...`,
    );
    for (const [name] of migrations) if (!fresh.includes(name)) await migrate(db, { only: name });
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
      // A partitioned table has no storage of its own: its partitions' sizes, summed.
      `SELECT relname, pg_size_pretty(coalesce((SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree(oid)),
                                            pg_total_relation_size(oid))) AS size
         FROM pg_class
        WHERE relname IN ('events', 'event_deliveries', 'webhook_queue', 'variants', 'products') ORDER BY relname`,
    );
    log(`  sizes: ${sizes.map((r: { relname: string; size: string }) => `${r.relname} ${r.size}`).join(', ')}`);
    const { rows: parts } = await pg.query(
      `SELECT count(*)::int AS n FROM pg_partition_tree('event_deliveries') WHERE isleaf`,
    );
    log(`  event_deliveries partitions: ${parts[0].n}`);

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
    log(
      `\n${'migration'.padEnd(43)} ${'phase'.padEnd(8)} ${'time'.padStart(7)}  tries  writer worst  writes  errors  reader worst  reads`,
    );
    const ordered = [
      ...migrations.filter(([, m]) => m.phase === 'expand'),
      ...migrations.filter(([, m]) => m.phase === 'contract'),
    ];
    for (const [name] of ordered.filter(([n]) => fresh.includes(n))) {
      const reading = LONG_READ_MS > 0 ? longRead(scratch.url, LONG_READ_MS) : undefined;
      await reading?.started;
      const [applied] = await migrate(db, { only: name });
      await reading?.done;
      const [w, r] = [writer.take(), reader.take()];
      const ms = (x: number) => `${x.toFixed(0)} ms`.padStart(12);
      log(
        `${name.padEnd(43)} ${applied.phase.padEnd(8)} ${secs(applied.duration_ms).padStart(7)}  ${String(applied.attempts).padStart(5)}  ${ms(w.worst)}  ${String(w.writes).padStart(6)}  ${String(w.errors.length).padStart(6)}  ${ms(r.worst)}  ${String(r.writes).padStart(5)}`,
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
