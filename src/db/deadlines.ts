import type { ClientConfig } from 'pg';
import type { Settings } from '../config';

/** Every bound a Postgres connection of ours carries (README, "Settings"; docs/operations.md). */
export interface DbDeadlines {
  /** Server side `statement_timeout`; 0: none. */
  statementMs: number;
  /** Client side: a query without an answer this long fails and its connection is destroyed; 0: none. */
  queryMs: number;
  /** Opening a connection (TCP, TLS, authentication). */
  connectMs: number;
  /** Waiting for a free pooled connection. */
  acquireMs: number;
  /** Server side `idle_in_transaction_session_timeout`. */
  idleInTransactionMs: number;
  /** Idle time before the first TCP keepalive probe. */
  keepAliveMs: number;
}

/**
 * The defaults: an API request fails within a few seconds when Postgres is slow, away or
 * blackholed, and a paused process's transaction gives its locks back within a minute.
 */
export const DB_DEADLINE_DEFAULTS = {
  statementMs: 5_000,
  /** The client's query deadline is the statement's plus this, so Postgres's cancel normally comes first. */
  queryMarginMs: 1_000,
  connectMs: 5_000,
  acquireMs: 5_000,
  idleInTransactionMs: 60_000,
  keepAliveMs: 10_000,
} as const;

const { queryMarginMs, ...defaults } = DB_DEADLINE_DEFAULTS;

/** The deadlines when no settings are at hand (scripts, tests). */
export const defaultDbDeadlines: DbDeadlines = { ...defaults, queryMs: defaults.statementMs + queryMarginMs };

/**
 * For bulk loads of bench and test data (never the service's own work): statements may run ten
 * minutes; connecting and pool waits stay bounded.
 */
export const bulkLoadDeadlines: DbDeadlines = {
  ...defaultDbDeadlines,
  statementMs: 600_000,
  queryMs: 600_000 + queryMarginMs,
};

/** The deadlines `settings` configure. */
export function dbDeadlinesOf(settings: Settings): DbDeadlines {
  return {
    statementMs: settings.DB_STATEMENT_TIMEOUT_MS,
    queryMs: settings.DB_QUERY_TIMEOUT_MS,
    connectMs: settings.DB_CONNECT_TIMEOUT_MS,
    acquireMs: settings.DB_POOL_ACQUIRE_TIMEOUT_MS,
    idleInTransactionMs: settings.DB_IDLE_IN_TRANSACTION_TIMEOUT_MS,
    keepAliveMs: settings.DB_KEEPALIVE_INITIAL_DELAY_MS,
  };
}

/** node-postgres options for `url` carrying `deadlines` (every connection the service opens, pooled or not). */
export function pgConnectionConfig(url: string, deadlines: DbDeadlines = defaultDbDeadlines): ClientConfig {
  return {
    connectionString: url,
    // Sent in the startup packet, so they hold from the first statement on.
    statement_timeout: deadlines.statementMs,
    idle_in_transaction_session_timeout: deadlines.idleInTransactionMs,
    query_timeout: deadlines.queryMs,
    connectionTimeoutMillis: deadlines.connectMs,
    keepAlive: true,
    keepAliveInitialDelayMillis: deadlines.keepAliveMs,
  };
}

/** A driver error's own message (knex prefixes the statement: `select 1 - Query read timeout`). */
function driverMessage(err: Error): string {
  const at = err.message.lastIndexOf(' - ');
  return at === -1 ? err.message : err.message.slice(at + 3);
}

/** node-postgres's client-side query deadline (`query_timeout`) expired. */
export function isQueryReadTimeout(err: unknown): boolean {
  return err instanceof Error && driverMessage(err) === 'Query read timeout';
}

/** Just enough of a pooled node-postgres client to retire it. */
interface PooledPgClient {
  /** knex's mark of a connection its pool must destroy rather than hand out (set on 'error' and 'end'). */
  __knex__disposed?: unknown;
  connection?: { stream?: { destroy(): void } };
}

/**
 * After a client-side query deadline the query may still be on the wire and the connection busy
 * with it: marks it for the pool to destroy (at once: the socket's 'end' comes a tick later, after
 * the release) and cuts its socket, so that the server ends the backend too.
 */
export function discardConnection(connection: unknown): void {
  const client = connection as PooledPgClient;
  client.__knex__disposed ??= 'Query read timeout';
  client.connection?.stream?.destroy();
}

/**
 * knex query options (`.options(…)`) that move the client-side deadline of one statement after a
 * longer `SET LOCAL statement_timeout` (`statementMs`) for it, so the server's cancel still comes first.
 */
export function clientDeadlineFor(statementMs: number): { query_timeout: number } {
  return { query_timeout: statementMs + DB_DEADLINE_DEFAULTS.queryMarginMs };
}

/**
 * `connection` (a knex instance's) with its client-side query deadline moved to follow a longer
 * statement_timeout that the caller sets on its connections (the migration runner).
 */
export function withStatementDeadline(connection: unknown, statementMs: number): unknown {
  if (typeof connection !== 'object' || connection === null) return connection;
  return { ...connection, ...clientDeadlineFor(statementMs) };
}

/** SQLSTATEs of a statement or session Postgres ended on a deadline, or of a server that cannot take work now. */
const UNAVAILABLE_SQLSTATES = new Map(
  Object.entries({
    '57014': 'DB_STATEMENT_TIMEOUT_MS', // query_canceled: statement_timeout (or an operator's cancel)
    '55P03': 'lock_timeout', // lock_not_available
    '25P03': 'DB_IDLE_IN_TRANSACTION_TIMEOUT_MS', // idle_in_transaction_session_timeout
    '57P01': 'none', // admin_shutdown
    '57P03': 'none', // cannot_connect_now (starting up, shutting down, recovering)
    '53300': 'none', // too_many_connections
    '53100': 'none', // disk_full: could not extend a file, no space left (npm run chaos, pg-disk-full)
  }),
);

/** Socket errors of a Postgres that is not there. */
const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE']);

/**
 * node-postgres's errors for a connection that did not open in time or was lost; it gives them no
 * code, so only their fixed messages tell them apart.
 */
const CONNECTION_LOST = new Map(
  Object.entries({
    'timeout expired': 'DB_CONNECT_TIMEOUT_MS',
    'Connection terminated': 'DB_CONNECT_TIMEOUT_MS',
    'Connection terminated unexpectedly': 'none',
    'Client has encountered a connection error and is not queryable': 'none',
  }),
);

/**
 * When `err` says Postgres could not do the work in time or at all (rather than refusing it), the
 * deadline that ended it, by its setting's name (`none`: Postgres was unreachable or going away).
 */
export function postgresDeadlineOf(err: unknown): string | undefined {
  if (!(err instanceof Error)) return undefined;
  if (err.name === 'KnexTimeoutError') return 'DB_POOL_ACQUIRE_TIMEOUT_MS';
  if (isQueryReadTimeout(err)) return 'DB_QUERY_TIMEOUT_MS';
  const { code, severity } = err as Error & { code?: unknown; severity?: unknown };
  if (typeof code === 'string' && severity !== undefined) return UNAVAILABLE_SQLSTATES.get(code);
  if (typeof code === 'string' && UNREACHABLE_CODES.has(code)) return 'none';
  return CONNECTION_LOST.get(driverMessage(err));
}
