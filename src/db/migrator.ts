/**
 * The migration runner behind `npm run migrate`, `npm start`, the tests and the benches. Each
 * migration runs alone, in its own transaction (or none, for `config.transaction: false`), on
 * connections that all carry a lock_timeout and a statement_timeout, and is tried again when it
 * times out waiting for a lock. `phase` applies the expand or the contract migrations of a release
 * that rolls under load (docs/operations.md, "Releasing").
 */
import knexFactory, { type Knex } from 'knex';
import { migrations, sourceOf, type Migration, type MigrationList, type Phase } from '../../migrations';
import { log } from '../lib/log';
import { withStatementDeadline } from './deadlines';

/**
 * Timeouts on every connection a migration uses, unless its file declares longer ones (never none).
 * While a migration waits for a lock, every write to that table queues behind it: lock_timeout is
 * the longest stall a try can cause (bench:migrate LONG_READ_S=5: the writer's worst was the
 * lock_timeout, 3,013 ms at 3 s), so it is short and the tries are many.
 */
export const MIGRATION_TIMEOUTS = { lockMs: 1_000, statementMs: 60_000 } as const;

/** How a migration that timed out waiting for a lock is tried again: doubling waits, bounded in tries and time. */
export interface RetrySchedule {
  /** Tries in all, the first included. */
  attempts: number;
  firstDelayMs: number;
  maxDelayMs: number;
  /** No try starts later than this after the first one started. */
  budgetMs: number;
}

/** Waits of 1, 2, 4, 8, 16, 30, 30 s between 8 tries, all within 3 minutes. */
export const LOCK_RETRY: RetrySchedule = { attempts: 8, firstDelayMs: 1_000, maxDelayMs: 30_000, budgetMs: 180_000 };

/** SQLSTATE lock_not_available: lock_timeout expired. */
const LOCK_TIMEOUT = '55P03';

/** A migration this run applied (the `--json` shape of `npm run migrate`). */
export interface AppliedMigration {
  name: string;
  phase: Phase;
  /** When its first try started (ISO 8601). */
  started_at: string;
  /** From the first try's start to the commit, waits between tries included. */
  duration_ms: number;
  attempts: number;
}

/** A migration of the list, applied or pending. */
export interface MigrationState {
  name: string;
  phase: Phase;
  applied_at: Date | null;
}

/** A statement as sent to Postgres: the runner's SETs on each new connection, or the migration's own. */
export interface SentStatement {
  sql: string;
  by: 'runner' | 'migration';
}

export interface MigrateOptions {
  /** Only the pending migrations of this phase; contract refuses while an earlier expand is pending. */
  phase?: Phase;
  /** Exactly this pending migration, wherever it is in the list. */
  only?: string;
  /** Stops before the first pending migration whose name starts with this (which must be pending). */
  before?: string;
  /** Stops once the migration whose name starts with this is applied (which must be pending). */
  through?: string;
  /** Default: every migration of this release (migrations/index.ts). */
  list?: MigrationList;
  retry?: RetrySchedule;
  /** Called with every statement the migrations send (knex's `query` event) and the runner's SETs. */
  onStatement?: (statement: SentStatement) => void;
}

/** A migration that failed or was refused, with what this run applied before it. */
export class MigrationError extends Error {
  constructor(
    message: string,
    readonly applied: AppliedMigration[],
    readonly failed?: { name: string; phase: Phase; attempts: number },
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'MigrationError';
  }
}

/** The applied migrations' names and times, in the order they were applied (none on an empty database). */
async function appliedRows(db: Knex): Promise<Array<{ name: string; migration_time: Date }>> {
  if (!(await db.schema.hasTable('knex_migrations'))) return [];
  return db('knex_migrations').orderBy('id').select('name', 'migration_time');
}

/** Every migration of `list` with its phase and when it was applied, and applied ones the list lacks (a newer release's). */
export async function migrationStatus(
  db: Knex,
  list: MigrationList = migrations,
): Promise<{ migrations: MigrationState[]; unknown: Array<{ name: string; applied_at: Date }> }> {
  const rows = await appliedRows(db);
  const appliedAt = new Map(rows.map((r) => [r.name, r.migration_time]));
  const known = new Set(list.map(([name]) => name));
  return {
    migrations: list.map(([name, m]) => ({ name, phase: m.phase, applied_at: appliedAt.get(name) ?? null })),
    unknown: rows.filter((r) => !known.has(r.name)).map((r) => ({ name: r.name, applied_at: r.migration_time })),
  };
}

/** Frees knex's migration lock, left taken by a run killed during a migration without a transaction. */
export async function unlockMigrations(db: Knex): Promise<void> {
  await db.migrate.forceFreeMigrationsLock();
}

/** The pending migrations `options` select, in list order; throws a MigrationError when they cannot run. */
function selected(pending: MigrationList, options: MigrateOptions): MigrationList {
  const refuse = (message: string) => new MigrationError(message, []);
  let queue: MigrationList = pending;
  if (options.only !== undefined) {
    queue = pending.filter(([name]) => name === options.only);
    if (queue.length === 0) throw refuse(`migration ${options.only} is not pending`);
  }
  if (options.phase === 'expand') queue = queue.filter(([, m]) => m.phase === 'expand');
  if (options.phase === 'contract') {
    queue = queue.filter(([, m]) => m.phase === 'contract');
    for (const [contract] of queue) {
      const at = pending.findIndex(([name]) => name === contract);
      const expand = pending.slice(0, at).find(([, m]) => m.phase === 'expand');
      if (expand) {
        throw refuse(
          `contract migration ${contract} waits for expand migration ${expand[0]}, listed before it and still ` +
            'pending: run `npm run migrate -- --phase expand` first',
        );
      }
    }
  }
  if (options.before !== undefined) {
    const at = queue.findIndex(([name]) => name.startsWith(options.before!));
    if (at < 0) throw refuse(`migration ${options.before} is not pending`);
    queue = queue.slice(0, at);
  }
  if (options.through !== undefined) {
    const at = queue.findIndex(([name]) => name.startsWith(options.through!));
    if (at < 0) throw refuse(`migration ${options.through} is not pending`);
    queue = queue.slice(0, at + 1);
  }
  return queue;
}

/**
 * Applies the pending migrations `options` select, in list order, each on its own and retried on a
 * lock timeout; returns what it applied. Throws a MigrationError (carrying what was applied before)
 * on the first that fails, or before any runs when the selection is refused.
 */
export async function migrate(db: Knex, options: MigrateOptions = {}): Promise<AppliedMigration[]> {
  const list = options.list ?? migrations;
  const done = new Set((await appliedRows(db)).map((r) => r.name));
  const queue = selected(
    list.filter(([name]) => !done.has(name)),
    options,
  );
  const applied: AppliedMigration[] = [];
  for (const [name, migration] of queue) {
    const outcome = await applyWithRetries(db, list, name, migration, options);
    if ('error' in outcome) {
      const cause = outcome.error;
      const why =
        cause instanceof Error && cause.name === 'MigrationLocked'
          ? 'knex_migrations_lock is taken: another `npm run migrate` is running, or one was killed during a ' +
            'migration without a transaction (then `npm run migrate -- --unlock`)'
          : cause instanceof Error
            ? cause.message
            : String(cause);
      throw new MigrationError(
        `migration ${name} failed: ${why}`,
        applied,
        { name, phase: migration.phase, attempts: outcome.attempts },
        { cause },
      );
    }
    if (outcome.applied) applied.push(outcome.applied);
  }
  return applied;
}

/** The migration's timeouts: the runner's, or the longer ones its file declares; never none. */
function timeoutsOf(name: string, migration: Migration): { lockMs: number; statementMs: number } {
  const timeouts = { ...MIGRATION_TIMEOUTS, ...migration.timeouts };
  for (const [key, ms] of Object.entries(timeouts)) {
    if (!Number.isInteger(ms) || ms <= 0) {
      throw new Error(
        `${name} declares timeouts.${key} = ${ms}: a migration always runs under a lock and a statement ` +
          'timeout (a file may declare longer ones, in positive milliseconds, never none)',
      );
    }
  }
  return timeouts;
}

/** Whether `err` (or a cause) is a lock timeout. */
function isLockTimeout(err: unknown): boolean {
  for (let at = err; at instanceof Error; at = at.cause) {
    if ((at as { code?: unknown }).code === LOCK_TIMEOUT) return true;
    // knex rethrows a failure to take its migration lock as MigrationLocked, without the SQLSTATE.
    if (at.name === 'MigrationLocked' && at.message.includes('lock timeout')) return true;
  }
  return false;
}

type Outcome = { applied: AppliedMigration | undefined } | { error: unknown; attempts: number };

/** Applies one migration, again after each lock timeout as LOCK_RETRY allows; any other error ends it at once. */
async function applyWithRetries(
  db: Knex,
  list: MigrationList,
  name: string,
  migration: Migration,
  options: MigrateOptions,
): Promise<Outcome> {
  const retry = options.retry ?? LOCK_RETRY;
  const startedAt = new Date().toISOString();
  const started = performance.now();
  let timeouts: { lockMs: number; statementMs: number };
  try {
    timeouts = timeoutsOf(name, migration);
  } catch (error) {
    return { error, attempts: 0 };
  }
  for (let attempt = 1; ; attempt++) {
    try {
      const ran = await applyOnce(db, list, name, migration, timeouts, options.onStatement);
      const applied = {
        name,
        phase: migration.phase,
        started_at: startedAt,
        duration_ms: Math.round(performance.now() - started),
        attempts: attempt,
      };
      // At debug: `npm run migrate` prints each one, and `npm start` stays quiet.
      if (ran) log.debug('migration applied', { ...applied });
      else log.info('migration already applied by another run', { name });
      return { applied: ran ? applied : undefined };
    } catch (error) {
      const delayMs = Math.min(retry.firstDelayMs * 2 ** (attempt - 1), retry.maxDelayMs);
      const elapsedMs = performance.now() - started;
      if (!isLockTimeout(error)) return { error, attempts: attempt };
      if (attempt >= retry.attempts || elapsedMs + delayMs > retry.budgetMs) {
        const seconds = (elapsedMs / 1000).toFixed(1);
        const gaveUp = new Error(
          `gave up after ${attempt} attempts in ${seconds} s, each waiting ${timeouts.lockMs} ms at most for its locks`,
          { cause: error },
        );
        return { error: gaveUp, attempts: attempt };
      }
      log.warn('migration timed out waiting for a lock; trying again', {
        migration: name,
        attempt,
        lock_timeout_ms: timeouts.lockMs,
        retry_in_ms: delayMs,
        error,
      });
      await new Promise((resolve) => setTimeout(resolve, delayMs));
    }
  }
}

/** The part of a pg client the pool's afterCreate hook gets. */
interface PgConnection {
  query(sql: string, callback: (err: Error | null) => void): void;
}

/**
 * One try of one migration through knex's migrator (its lock, its knex_migrations row, in the
 * migration's transaction unless it opts out) on a pool of its own, whose every connection sets the
 * timeouts as it is made: a migration without a transaction runs on pooled connections, where
 * `SET LOCAL` would cover one statement's transaction only. Returns false when another run applied it meanwhile.
 */
async function applyOnce(
  db: Knex,
  list: MigrationList,
  name: string,
  migration: Migration,
  timeouts: { lockMs: number; statementMs: number },
  onStatement?: (statement: SentStatement) => void,
): Promise<boolean> {
  const settings = [`SET lock_timeout = '${timeouts.lockMs}ms'`, `SET statement_timeout = '${timeouts.statementMs}ms'`];
  let inMigration = false;
  const observed: Migration = {
    ...migration,
    up: async (knex) => {
      inMigration = true;
      try {
        await migration.up(knex);
      } finally {
        inMigration = false;
      }
    },
  };
  const runner = knexFactory({
    client: db.client.config.client,
    // The client-side query deadline follows the migration's statement_timeout, not the service's.
    connection: withStatementDeadline(db.client.config.connection, timeouts.statementMs) as Knex.StaticConnectionConfig,
    pool: {
      min: 0,
      max: 2,
      afterCreate: (connection: PgConnection, done: (err: Error | null, connection: PgConnection) => void) => {
        // Named after the migration (pg_stat_activity, lock waits: bench:upgrade attributes them by it).
        const application = `${process.env.PGAPPNAME ?? 'migrate'}:${name}`.slice(0, 63).replace(/'/g, '');
        connection.query(`SET application_name = '${application}'; ${settings.join('; ')}`, (err) => {
          if (!err) for (const sql of settings) onStatement?.({ sql, by: 'runner' });
          done(err, connection);
        });
      },
    },
    migrations: {
      migrationSource: sourceOf(list.map((entry) => (entry[0] === name ? [name, observed] : entry))),
      tableName: 'knex_migrations',
    },
    // knex's own warnings repeat the error this module logs and throws.
    log: {
      warn: (message: string) => log.debug('knex migrator', { message }),
      error: (message: string) => log.debug('knex migrator', { message }),
      deprecate: (method: string, alternative: string) => log.debug('knex migrator', { method, alternative }),
      debug: () => undefined,
    },
  });
  if (onStatement) {
    runner.on('query', (query: { sql: string; bindings?: readonly Knex.Value[] }) => {
      if (!inMigration) return;
      // As Postgres runs it: knex has numbered the placeholders ($1…); each becomes its value's literal.
      const values = query.bindings ?? [];
      const sql = query.sql.replace(/\$(\d+)\b(?!\$)/g, (placeholder, n: string) =>
        Number(n) <= values.length ? runner.raw('?', [values[Number(n) - 1]]).toQuery() : placeholder,
      );
      onStatement({ sql, by: 'migration' });
    });
  }
  try {
    const [, ran] = (await runner.migrate.up({ name })) as [number, string[]];
    return ran.includes(name);
  } finally {
    await runner.destroy();
  }
}
