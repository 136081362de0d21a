import knexFactory, { Knex } from 'knex';
import { types } from 'pg';
import { migrationSource } from '../../migrations';
import {
  defaultDbDeadlines,
  discardConnection,
  isQueryReadTimeout,
  pgConnectionConfig,
  type DbDeadlines,
} from './deadlines';
import { log } from '../lib/log';
import { countDbError } from '../telemetry/db-errors';
import { migrate } from './migrator';

// Money and counts are bigint columns; every value we store fits in a JS number exactly.
types.setTypeParser(types.builtins.INT8, (v) => Number(v));

export type Db = Knex;

interface KnexPgClient extends Knex.Client {
  _query(connection: unknown, obj: unknown): Promise<unknown>;
}
// knex's own Postgres dialect, which has no type declarations of its own.
const KnexPg = require('knex/lib/dialects/postgres') as new (config: Knex.Config) => KnexPgClient;

/**
 * knex's Postgres dialect, except that a connection whose query passed its client-side deadline is
 * never reused, and every error Postgres answers is counted by SQLSTATE (svc_db_errors_total).
 */
class BoundedPgClient extends KnexPg {
  override async _query(connection: unknown, obj: unknown): Promise<unknown> {
    try {
      return await super._query(connection, obj);
    } catch (err) {
      countDbError(err);
      if (isQueryReadTimeout(err)) discardConnection(connection);
      throw err;
    }
  }
}

const firstLine = (message: unknown) => String(message).split('\n')[0];

/** A knex instance on `url` with a bounded pool, every connection and query of it under `deadlines`. */
export function createDb(url: string, poolMax = 10, deadlines: DbDeadlines = defaultDbDeadlines): Db {
  return knexFactory({
    client: BoundedPgClient as unknown as typeof Knex.Client,
    connection: pgConnectionConfig(url, deadlines) as Knex.PgConnectionConfig,
    pool: { min: 0, max: poolMax },
    acquireConnectionTimeout: deadlines.acquireMs,
    // knex's own notices (a failed acquire, with its stack) through our logger, first line only:
    // the error itself reaches the caller, which decides what to say about it.
    log: {
      warn: (message: unknown) => log.debug('knex', { message: firstLine(message) }),
      error: (message: unknown) => log.warn('knex', { message: firstLine(message) }),
      deprecate: (method: string, alternative: string) => log.warn('knex deprecation', { method, alternative }),
      debug: () => undefined,
    },
    migrations: { migrationSource, tableName: 'knex_migrations' },
  });
}

/** Applies every pending migration in order (src/db/migrator.ts) and returns the names applied. */
export async function migrateLatest(db: Db): Promise<string[]> {
  return (await migrate(db)).map((m) => m.name);
}

/**
 * Applies migrations in order through the one whose name starts with `name` (a test or a bench
 * building the schema of an earlier release); throws if it is not pending.
 */
export async function migrateUpTo(db: Db, name: string): Promise<void> {
  await migrate(db, { through: name });
}

/** Applies migrations in order until the one whose name starts with `name` is the next; throws if it is not pending. */
export async function migrateUpToBefore(db: Db, name: string): Promise<void> {
  await migrate(db, { before: name });
}

/** Runs `work` in the caller's transaction when `db` is one (no savepoint), else in a new transaction. */
export function inTransaction<T>(db: Db, work: (trx: Db) => Promise<T>): Promise<T> {
  return db.isTransaction ? work(db) : db.transaction(work);
}

/**
 * Runs `reads` in one REPEATABLE READ READ ONLY transaction, so that every statement sees the same
 * snapshot: an answer built from several reads shows one moment, never a commit that landed
 * between two of them. Two round trips more than the reads (BEGIN … and COMMIT); a single statement
 * is one moment already and needs none. Not inside another transaction (its reads would not share one snapshot).
 */
export function inSnapshot<T>(db: Db, reads: (trx: Db) => Promise<T>): Promise<T> {
  if (db.isTransaction) throw new Error('inSnapshot runs outside transactions');
  return db.transaction(reads, { isolationLevel: 'repeatable read', readOnly: true });
}

/**
 * Runs `text` (placeholders `$1`…) as the named prepared statement `name` on a pooled connection
 * (the transaction's own when `db` is one: knex's transaction client hands out only that), which
 * then parses and plans it once instead of on every call; returns its rows. For large statements
 * on hot paths.
 */
export async function preparedQuery<Row>(db: Db, name: string, text: string, values: unknown[]): Promise<Row[]> {
  const connection = await db.client.acquireConnection();
  try {
    return (await connection.query({ name, text, values })).rows;
  } catch (err) {
    if (isQueryReadTimeout(err)) discardConnection(connection);
    throw err;
  } finally {
    await db.client.releaseConnection(connection);
  }
}
