import { spawn } from 'node:child_process';
import { join } from 'node:path';
import type { Knex } from 'knex';
import { Client as PgClient } from 'pg';
import { sourceOf, type Migration, type MigrationList } from '../../migrations';
import { migrateUpTo } from '../../src/db/knex';
import { migrate, MigrationError, migrationStatus, type RetrySchedule, unlockMigrations } from '../../src/db/migrator';
import { captureLogs, setLogLevel } from '../../src/lib/log';
import { fixtureMigration } from '../helpers/migrations';
import { ownDatabase } from '../helpers/services';

/**
 * The migration runner (src/db/migrator.ts) and `npm run migrate`: phases, one transaction per
 * migration, the timeouts on every connection, and retries of a lock timeout. Each test has an
 * empty database of its own and migrations that exist only here.
 */

const root = join(__dirname, '..', '..');
/** Short waits, so that a test retries within a second or two. */
const quickRetry: RetrySchedule = { attempts: 5, firstDelayMs: 300, maxDelayMs: 1_000, budgetMs: 15_000 };

let own: Awaited<ReturnType<typeof ownDatabase>>;
let db: Knex;
beforeEach(async () => {
  setLogLevel('silent');
  own = await ownDatabase({ migrated: false });
  db = own.db;
});
afterEach(() => own.drop());

const names = (list: MigrationList) => list.map(([name]) => name);
const pending = async (list: MigrationList) =>
  (await migrationStatus(db, list)).migrations.filter((m) => m.applied_at === null).map((m) => m.name);

describe('phases', () => {
  const list: MigrationList = [
    fixtureMigration('20990101000001_add_table', 'expand', ['CREATE TABLE phase_a (id bigint PRIMARY KEY, old text)']),
    fixtureMigration('20990101000002_drop_old', 'contract', ['ALTER TABLE phase_a DROP COLUMN old']),
    fixtureMigration('20990101000003_add_column', 'expand', ['ALTER TABLE phase_a ADD COLUMN new text']),
  ];

  it('expand applies the expand migrations in order and leaves the contract ones pending', async () => {
    const applied = await migrate(db, { phase: 'expand', list });
    expect(applied).toEqual([
      {
        name: '20990101000001_add_table',
        phase: 'expand',
        started_at: expect.any(String),
        duration_ms: expect.any(Number),
        attempts: 1,
      },
      {
        name: '20990101000003_add_column',
        phase: 'expand',
        started_at: expect.any(String),
        duration_ms: expect.any(Number),
        attempts: 1,
      },
    ]);
    expect(await pending(list)).toEqual(['20990101000002_drop_old']);
    // knex's own list accepts a migration applied past a pending one (it checks that applied ones exist).
    const [done, left] = (await db.migrate.list({ migrationSource: sourceOf(list) })) as [
      Array<{ name: string }>,
      string[],
    ];
    expect([done.map((m) => m.name), left]).toEqual([
      ['20990101000001_add_table', '20990101000003_add_column'],
      ['20990101000002_drop_old'],
    ]);

    expect((await migrate(db, { phase: 'contract', list })).map((m) => m.name)).toEqual(['20990101000002_drop_old']);
    expect(await pending(list)).toEqual([]);
    const { rows } = await db.raw(
      `SELECT column_name FROM information_schema.columns WHERE table_name = 'phase_a' ORDER BY ordinal_position`,
    );
    expect(rows.map((r: { column_name: string }) => r.column_name)).toEqual(['id', 'new']);
  });

  it('contract refuses while an expand migration listed before one of them is pending, naming it', async () => {
    const error = await migrate(db, { phase: 'contract', list }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MigrationError);
    expect((error as MigrationError).message).toBe(
      'contract migration 20990101000002_drop_old waits for expand migration 20990101000001_add_table, listed ' +
        'before it and still pending: run `npm run migrate -- --phase expand` first',
    );
    expect(await pending(list)).toEqual(names(list));
  });

  it('without a phase, every pending migration in file order', async () => {
    expect((await migrate(db, { list })).map((m) => m.name)).toEqual(names(list));
  });
});

describe('transactions', () => {
  const record = (label: string) => `INSERT INTO tx_log (label, txid) VALUES ('${label}', txid_current())`;
  const list: MigrationList = [
    fixtureMigration('20990101000001_log', 'expand', [
      'CREATE TABLE tx_log (label text, txid bigint)',
      record('first'),
    ]),
    fixtureMigration('20990101000002_second', 'expand', [record('second a'), record('second b')]),
    fixtureMigration('20990101000003_autocommit', 'expand', [record('no transaction a'), record('no transaction b')], {
      config: { transaction: false },
    }),
    fixtureMigration('20990101000004_fails', 'expand', [record('failed'), 'SELECT * FROM no_such_table']),
  ];

  it('gives each migration its own transaction (none with transaction: false), and keeps those before a failure', async () => {
    const error = (await migrate(db, { list }).catch((e: unknown) => e)) as MigrationError;
    expect(error).toBeInstanceOf(MigrationError);
    expect([error.applied.map((m) => m.name), error.failed]).toEqual([
      names(list).slice(0, 3),
      { name: '20990101000004_fails', phase: 'expand', attempts: 1 },
    ]);
    expect(await pending(list)).toEqual(['20990101000004_fails']);
    const { rows } = await db.raw('SELECT label, txid FROM tx_log');
    const txid = Object.fromEntries(rows.map((r: { label: string; txid: number }) => [r.label, r.txid]));
    expect(Object.keys(txid)).toEqual(['first', 'second a', 'second b', 'no transaction a', 'no transaction b']);
    expect(txid['second a']).toBe(txid['second b']);
    expect(txid.first).not.toBe(txid['second a']);
    expect(txid['no transaction a']).not.toBe(txid['no transaction b']);
  });
});

describe('timeouts', () => {
  const record = (label: string) =>
    `INSERT INTO settings_log VALUES ('${label}', pg_backend_pid(), current_setting('lock_timeout'), current_setting('statement_timeout'))`;
  const twoConnections: Migration['up'] = async (knex) => {
    // The pool's two connections at once: one in a transaction (SET LOCAL there would cover only it), one outside.
    await knex.transaction(async (trx) => {
      await trx.raw(record('in a transaction'));
      await knex.raw(record('beside it'));
    });
  };
  const list: MigrationList = [
    fixtureMigration('20990101000001_log', 'expand', [
      'CREATE TABLE settings_log (label text, pid int, lock_timeout text, statement_timeout text)',
      record('transactional'),
    ]),
    fixtureMigration('20990101000002_pooled', 'expand', twoConnections, { config: { transaction: false } }),
    fixtureMigration('20990101000003_longer', 'expand', [record('declared longer')], {
      timeouts: { lockMs: 10_000, statementMs: 600_000 },
    }),
  ];

  it('sets lock_timeout and statement_timeout on every connection, or the longer ones the file declares', async () => {
    await migrate(db, { list });
    const { rows } = await db.raw('SELECT label, pid, lock_timeout, statement_timeout FROM settings_log');
    expect(rows).toEqual([
      { label: 'transactional', pid: expect.any(Number), lock_timeout: '1s', statement_timeout: '1min' },
      { label: 'in a transaction', pid: expect.any(Number), lock_timeout: '1s', statement_timeout: '1min' },
      { label: 'beside it', pid: expect.any(Number), lock_timeout: '1s', statement_timeout: '1min' },
      { label: 'declared longer', pid: expect.any(Number), lock_timeout: '10s', statement_timeout: '10min' },
    ]);
    expect(rows[1].pid).not.toBe(rows[2].pid);
  });

  it('refuses a migration that declares no timeout (0)', async () => {
    const none = fixtureMigration('20990101000001_none', 'expand', ['CREATE TABLE never (id int)'], {
      timeouts: { statementMs: 0 },
    });
    const error = (await migrate(db, { list: [none] }).catch((e: unknown) => e)) as MigrationError;
    expect([error.message, error.failed]).toEqual([
      'migration 20990101000001_none failed: 20990101000001_none declares timeouts.statementMs = 0: a migration ' +
        'always runs under a lock and a statement timeout (a file may declare longer ones, in positive milliseconds, never none)',
      { name: '20990101000001_none', phase: 'expand', attempts: 0 },
    ]);
    expect(await pending([none])).toEqual(['20990101000001_none']);
  });
});

describe('lock timeouts', () => {
  let holder: PgClient;
  let lines: string[];
  let restoreLogs: () => void;
  beforeEach(async () => {
    await db.raw('CREATE TABLE locked (id bigint PRIMARY KEY)');
    holder = new PgClient({ connectionString: own.url });
    await holder.connect();
    // A reader's lock, which the ALTER TABLE below must wait for.
    await holder.query('BEGIN');
    await holder.query('LOCK TABLE locked IN ACCESS SHARE MODE');
    lines = [];
    restoreLogs = captureLogs({ write: (line: string) => void lines.push(line) }, 'info');
  });
  afterEach(async () => {
    restoreLogs();
    await holder.end();
  });

  const retries = () =>
    lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'migration timed out waiting for a lock; trying again');
  const untilRetried = async () => {
    while (retries().length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
  };

  it.each([
    ['in its transaction', {}],
    ['without a transaction', { config: { transaction: false } }],
  ])('retries a lock timeout (%s) until the lock is free', async (_, extra) => {
    const list = [
      fixtureMigration('20990101000001_alter', 'expand', ['ALTER TABLE locked ADD COLUMN IF NOT EXISTS x text'], {
        timeouts: { lockMs: 200 },
        ...extra,
      }),
    ];
    const applying = migrate(db, { list, retry: quickRetry });
    await untilRetried();
    await holder.query('COMMIT');
    const [applied] = await applying;
    expect(applied).toEqual({
      name: '20990101000001_alter',
      phase: 'expand',
      started_at: expect.any(String),
      duration_ms: expect.any(Number),
      attempts: expect.any(Number),
    });
    expect(applied.attempts).toBeGreaterThanOrEqual(2);
    expect(retries()[0]).toEqual(
      expect.objectContaining({
        level: 'warn',
        migration: '20990101000001_alter',
        attempt: 1,
        lock_timeout_ms: 200,
        retry_in_ms: 300,
        error: expect.objectContaining({ sqlstate: '55P03' }),
      }),
    );
  });

  it('gives up after the tries the schedule allows', async () => {
    const list = [
      fixtureMigration('20990101000001_alter', 'expand', ['ALTER TABLE locked ADD COLUMN x text'], {
        timeouts: { lockMs: 100 },
      }),
    ];
    const retry = { attempts: 3, firstDelayMs: 50, maxDelayMs: 50, budgetMs: 10_000 };
    const error = (await migrate(db, { list, retry }).catch((e: unknown) => e)) as MigrationError;
    expect(error.message).toMatch(
      /^migration 20990101000001_alter failed: gave up after 3 attempts in \d+\.\d s, each waiting 100 ms at most for its locks$/,
    );
    expect(error.failed).toEqual({ name: '20990101000001_alter', phase: 'expand', attempts: 3 });
    expect(retries().map((l) => l.attempt)).toEqual([1, 2]);
  });

  it('fails at once on any other error', async () => {
    await holder.query('COMMIT');
    const list = [fixtureMigration('20990101000001_broken', 'expand', ['ALTER TABLE no_such_table ADD COLUMN x text'])];
    const error = (await migrate(db, { list, retry: quickRetry }).catch((e: unknown) => e)) as MigrationError;
    expect(error.failed).toEqual({ name: '20990101000001_broken', phase: 'expand', attempts: 1 });
    expect(retries()).toEqual([]);
  });
});

describe('knex’s migration lock', () => {
  it('names the way out when a killed run left it taken, and --unlock frees it', async () => {
    const list = [fixtureMigration('20990101000001_table', 'expand', ['CREATE TABLE after_unlock (id int)'])];
    await db.migrate.list({ migrationSource: sourceOf(list) }); // knex's tables, as any earlier run leaves them
    await db('knex_migrations_lock').update({ is_locked: 1 });
    const error = (await migrate(db, { list }).catch((e: unknown) => e)) as MigrationError;
    expect(error.message).toBe(
      'migration 20990101000001_table failed: knex_migrations_lock is taken: another `npm run migrate` is ' +
        'running, or one was killed during a migration without a transaction (then `npm run migrate -- --unlock`)',
    );
    await unlockMigrations(db);
    expect((await migrate(db, { list })).map((m) => m.name)).toEqual(['20990101000001_table']);
  });
});

describe('npm run migrate', () => {
  /** `npm run -s migrate -- …args` against the test's database: its exit code and output. */
  const run = (...args: string[]) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, ['--import', 'tsx', join('src', 'main', 'migrate.ts'), ...args], {
        cwd: root,
        env: { PATH: process.env.PATH, DATABASE_URL: own.url, LOG_LEVEL: 'warn' },
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      child.on('exit', (code) => resolve({ code, stdout, stderr }));
    });

  it('applies this release by phase from the previous release’s schema, and reports each migration', async () => {
    await migrateUpTo(db, '20261126050000_undelivered_backfill');
    const drop = '20261127120000_delivery_tenant_drop';

    const expands = [
      '20261127140000_console_accounts',
      '20261127180000_endpoint_watches',
      '20261127190000_console_passkeys',
      '20261128100000_console_inventory',
      '20261201100000_delivery_endpoint_index',
      '20261201100100_console_reauth_invites',
    ];
    const expand = await run('--phase', 'expand', '--json');
    expect([expand.code, JSON.parse(expand.stdout)]).toEqual([
      0,
      {
        phase: 'expand',
        applied: expands.map((name) => ({
          name,
          phase: 'expand',
          started_at: expect.any(String),
          duration_ms: expect.any(Number),
          attempts: 1,
        })),
        pending: [{ name: drop, phase: 'contract' }],
      },
    ]);
    const status = await run('--status');
    expect(status.stdout.split('\n').filter((l) => l.endsWith(' pending'))).toEqual([
      `${drop.padEnd(48)} contract  pending`,
    ]);

    const contract = await run('--phase', 'contract', '--json');
    expect([contract.code, JSON.parse(contract.stdout)]).toEqual([
      0,
      {
        phase: 'contract',
        applied: [
          {
            name: drop,
            phase: 'contract',
            started_at: expect.any(String),
            duration_ms: expect.any(Number),
            attempts: 1,
          },
        ],
        pending: [],
      },
    ]);
    const json = JSON.parse((await run('--status', '--json')).stdout);
    expect(json.migrations.find((m: { name: string }) => m.name === drop)).toEqual({
      name: drop,
      phase: 'contract',
      applied_at: expect.any(String),
    });
    expect(json.migrations.at(-1)).toEqual({ name: expands.at(-1), phase: 'expand', applied_at: expect.any(String) });
    expect(json.unknown).toEqual([]);
    // Four `npm run migrate` processes, and the expand builds indexes CONCURRENTLY (one copy per
    // day of event_deliveries): 10 s alone, over a minute beside other test files on two cores.
  }, 180_000);

  it('exits 1 naming the pending expand migration when contract cannot run yet, and 2 on a bad flag', async () => {
    const refused = await run('--phase', 'contract');
    expect([refused.code, refused.stdout.split('\n').at(-2)]).toEqual([
      1,
      'error: contract migration 20261124110000_idempotent_creates waits for expand migration ' +
        '20261121000000_foundation, listed before it and still pending: run `npm run migrate -- --phase expand` first',
    ]);
    const usage = await run('--phase', 'later');
    expect([usage.code, usage.stderr.split('\n')[0]]).toEqual([2, '--phase is expand or contract, not later']);
  });
});
