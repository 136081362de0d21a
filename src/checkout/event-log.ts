import type { Knex } from 'knex';
import type { Db } from '../db/knex';
import { purgeBefore } from '../webhooks/queue';
import { clientDeadlineFor } from '../db/deadlines';

/**
 * The event log's days (migrations/20261125200000_partitioned_event_log.ts): `events` by
 * created_at, `event_deliveries` by event id, one partition a UTC day (`events_d20261125`,
 * `event_deliveries_d20261125_live` and `_test`, …), made ahead of need and dropped whole past
 * retention; the tables from before the cut-over (`<table>_legacy`, the DEFAULT partitions),
 * purged in bounded batches until they can be dropped; and the pending webhook rows of events past
 * retention (the queue holds pending rows only: 20261126030000_pending_queue), deleted in batches.
 */

/** The tables of the event log, the event's own first. */
const TABLES = ['events', 'event_deliveries'] as const;
const DAY_MS = 24 * 60 * 60 * 1000;
/** Days made ahead of today: a janitor down for less than this never stops an event being written. */
export const EVENT_DAYS_AHEAD = 7;
/** How long a partition DDL waits for its lock before giving up until the next sweep (it blocks the table's readers meanwhile). */
const DDL_LOCK_TIMEOUT = '100ms';
/**
 * A day's partition takes its rows out of the default partition as it is made: longer than the
 * service's DB_STATEMENT_TIMEOUT_MS may allow, well inside the janitor activity's 5 minutes.
 */
const DDL_STATEMENT_TIMEOUT_MS = 120_000;
/** Legacy rows deleted per statement, and statements per sweep at most. */
const LEGACY_BATCH = 5_000;
const LEGACY_BATCHES_PER_SWEEP = 200;

/** What one pass over the event log did. */
export interface EventLogSweep {
  /** Days whose partitions were made. */
  daysCreated: number;
  /** Partitions dropped (two tables, so up to three a day). */
  partitionsDropped: number;
  /** Events deleted from the legacy table, with their rows. */
  legacyEvents: number;
  /** Whether the legacy tables were dropped in this pass. */
  legacyDropped: boolean;
  /** Pending webhook rows of events past retention, deleted. */
  queueRowsPurged: number;
  /** DDL that found its lock taken (retried at the next sweep). */
  lockTimeouts: number;
}

const dayOf = (name: string): number | null => {
  const m = /_d(\d{4})(\d{2})(\d{2})(?:_live|_test)?$/.exec(name);
  return m ? Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])) : null;
};
const utcDay = (ms: number) => Math.floor(ms / DAY_MS) * DAY_MS;

/** The daily partitions of the event log's tables, with the UTC day each holds. */
async function dailyPartitions(db: Db): Promise<Array<{ name: string; day: number }>> {
  const { rows } = await db.raw(
    `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = ANY (ARRAY[${TABLES.map(() => '?::regclass').join(', ')}])`,
    [...TABLES],
  );
  return (rows as Array<{ name: string }>)
    .map(({ name }) => ({ name, day: dayOf(name) }))
    .filter((p): p is { name: string; day: number } => p.day !== null);
}

/**
 * Runs one DDL statement with a short lock timeout: `lock` when the lock was not free in time,
 * `conflict` when the default partition holds rows of a day being made.
 */
async function ddl(
  db: Db,
  sql: string,
  bindings: readonly Knex.RawBinding[] = [],
): Promise<'ok' | 'lock' | 'conflict'> {
  try {
    await db.transaction(async (trx) => {
      await trx.raw(`SET LOCAL lock_timeout = '${DDL_LOCK_TIMEOUT}'`);
      await trx.raw(`SET LOCAL statement_timeout = ${DDL_STATEMENT_TIMEOUT_MS}`);
      await trx.raw(sql, bindings).options(clientDeadlineFor(DDL_STATEMENT_TIMEOUT_MS));
    });
    return 'ok';
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === '55P03') return 'lock'; // lock_not_available
    if (code === '23514') return 'conflict'; // check_violation: "would be violated by some row"
    throw err;
  }
}

const legacyExists = async (db: Db): Promise<boolean> =>
  (await db.raw(`SELECT to_regclass('events_legacy') IS NOT NULL AS present`)).rows[0].present;

/**
 * Makes the missing days from today (or the oldest day made) to EVENT_DAYS_AHEAD past `nowMs`, drops the days wholly
 * older than `cutoffMs`, and purges the legacy tables (batches of LEGACY_BATCH events with their
 * rows, at most LEGACY_BATCHES_PER_SWEEP) until they hold nothing and nothing can land in them,
 * then drops them, and deletes the queue rows of events older than `cutoffMs`. Harmless run twice, late or early: every step is by name and idempotent.
 */
export async function sweepEventLog(db: Db, nowMs: number, cutoffMs: number): Promise<EventLogSweep> {
  const out: EventLogSweep = {
    daysCreated: 0,
    partitionsDropped: 0,
    legacyEvents: 0,
    legacyDropped: false,
    queueRowsPurged: 0,
    lockTimeouts: 0,
  };
  const partitions = await dailyPartitions(db);
  const eventDays = partitions.filter((p) => p.name.startsWith('events_')).map((p) => p.day);
  // Every day from today to EVENT_DAYS_AHEAD that is missing, not only those after the newest:
  // a day made far ahead (by a clock ahead) must not leave the days before it unmade.
  // Never before the oldest day made: the days before the cut-over live in the legacy table.
  const made = new Set(eventDays);
  const first = Math.max(utcDay(nowMs), eventDays.length > 0 ? Math.min(...eventDays) : 0);
  for (let day = first; day <= utcDay(nowMs) + EVENT_DAYS_AHEAD * DAY_MS; day += DAY_MS) {
    if (made.has(day)) continue;
    const result = await ddl(db, 'SELECT event_log_ensure_day(?::date)', [new Date(day).toISOString().slice(0, 10)]);
    if (result === 'lock') {
      out.lockTimeouts++;
      break; // the next sweep makes the rest
    }
    if (result === 'ok') out.daysCreated++;
    // 'conflict': not expected since 20261126021000 (a day takes its rows out of the default
    // partition); the day is tried again at the next sweep.
  }
  await db.raw('UPDATE event_log_retention SET cutoff = greatest(cutoff, ?)', [new Date(cutoffMs)]);

  if (await legacyExists(db)) {
    for (let i = 0; i < LEGACY_BATCHES_PER_SWEEP; i++) {
      const { rows } = await db.raw(
        `WITH gone AS (
           DELETE FROM events_legacy
            WHERE ctid = ANY (ARRAY(SELECT ctid FROM events_legacy WHERE created_at < ? LIMIT ${LEGACY_BATCH}))
           RETURNING id
         ), deliveries AS (
           DELETE FROM event_deliveries_legacy WHERE event_id IN (SELECT id FROM gone)
         )
         SELECT count(*)::int AS n FROM gone`,
        [new Date(cutoffMs)],
      );
      out.legacyEvents += rows[0].n;
      if (rows[0].n < LEGACY_BATCH) break;
    }
    // Nothing can land in the legacy tables once every day before the oldest daily one is past retention.
    const oldest = eventDays.length > 0 ? Math.min(...eventDays) : Infinity;
    const { rows } = await db.raw(`SELECT NOT EXISTS (SELECT 1 FROM events_legacy) AS empty`);
    if (rows[0].empty && oldest <= cutoffMs) {
      if ((await ddl(db, 'DROP TABLE events_legacy, event_deliveries_legacy')) === 'ok') {
        out.legacyDropped = true;
      } else out.lockTimeouts++;
    }
  }
  if (!(await legacyExists(db))) {
    // The catch-all for events beyond the days made (normally empty), once the legacy table no
    // longer is the default; what lands there is purged row by row.
    if ((await ddl(db, 'CREATE TABLE IF NOT EXISTS events_default PARTITION OF events DEFAULT')) !== 'ok') {
      out.lockTimeouts++;
    }
    await db.raw(
      `DELETE FROM events_default
        WHERE ctid = ANY (ARRAY(SELECT ctid FROM events_default WHERE created_at < ? LIMIT ${LEGACY_BATCH}))`,
      [new Date(cutoffMs)],
    );
  }

  out.queueRowsPurged = await purgeBefore(db, cutoffMs, LEGACY_BATCHES_PER_SWEEP);
  for (const p of partitions.filter((x) => x.day + DAY_MS <= cutoffMs)) {
    if ((await ddl(db, 'DROP TABLE IF EXISTS ??', [p.name])) === 'ok') out.partitionsDropped++;
    else out.lockTimeouts++;
  }
  return out;
}
