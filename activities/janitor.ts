import { ApplicationFailure } from '@temporalio/common';
import type { Knex } from 'knex';
import type { Db } from '../src/db/knex';
import { EVENT_RETENTION_MS } from '../src/checkout/events';
import { type EventLogSweep, sweepEventLog } from '../src/checkout/event-log';
import { janitorSchedule } from '../src/temporal/janitor';

export interface SweepResult {
  idempotencyRecords: number;
  rateLimitWindows: number;
  /** Events deleted row by row (only from the table kept from before the event log was partitioned). */
  events: number;
  /** SMS bodies (OTP codes) cleared. */
  smsBodies: number;
  /** Outbox rows deleted. */
  outboxMessages: number;
  /** The event log's days: made ahead, dropped past retention. */
  eventLog?: EventLogSweep;
  /** `webhook_undelivered` rows deleted: those of events past retention (no foreign key takes them with their day). */
  undeliveredRows?: number;
}

/** Rows one purge statement deletes at most: each statement's locks and WAL stay bounded however far behind the sweep is. */
const PURGE_BATCH = 10_000;

/**
 * Deletes the rows of `table` matching `where`, PURGE_BATCH at a time (each batch a statement of
 * its own, committed on its own), until none is left; returns how many. When the worker stops
 * between two batches it fails the attempt (retryable): the next one, on another worker, goes on
 * from where this one left (every batch is committed, the sweep is idempotent).
 */
async function purge(
  db: Db,
  table: string,
  where: string,
  bindings: readonly Knex.RawBinding[],
  stopping?: AbortSignal,
): Promise<number> {
  let total = 0;
  for (;;) {
    if (stopping?.aborted) {
      throw ApplicationFailure.retryable(
        `worker stopping: the ${table} purge goes on in the next attempt`,
        'WorkerStopping',
      );
    }
    const { rowCount } = await db.raw(
      `DELETE FROM ?? WHERE ctid = ANY (ARRAY(SELECT ctid FROM ?? WHERE ${where} LIMIT ${PURGE_BATCH}))`,
      [table, table, ...bindings],
    );
    total += rowCount ?? 0;
    if ((rowCount ?? 0) < PURGE_BATCH) return total;
  }
}

/** Janitor activities: retention sweeps, each idempotent. */
export function createJanitorActivities({ db, stopping }: { db: Db; stopping?: AbortSignal }) {
  const purgeUntilStopped = (table: string, where: string, bindings: readonly Knex.RawBinding[]) =>
    purge(db, table, where, bindings, stopping);
  return {
    /**
     * Deletes idempotency records older than 24 h, rate-limit windows older than a day and outbox
     * rows older than 30 days in batches of PURGE_BATCH; drops the event log's days (events with
     * their deliveries and queue rows) once wholly older than 30 days and makes the week ahead,
     * deleting the undelivered-list rows of events past retention in batches of PURGE_BATCH; and
     * clears SMS bodies (OTP codes: sent, given up, test mode or never sent) 10 minutes after
     * they were queued, as of `nowMs`: the workflow's time, so a time-skipping test moves it. A
     * body is cleared only once it is 10 minutes old by the database's clock too, so a clock run
     * ahead never takes a code a shopper is still typing. Hourly sweeps: a body is gone within 10
     * minutes and an hour (a sent one is masked at once).
     */
    async sweepRetention({ nowMs }: { nowMs: number }): Promise<SweepResult> {
      const now = nowMs;
      const idempotencyRecords = await purgeUntilStopped('idempotency_records', 'created_at < ?', [
        new Date(now - janitorSchedule.idempotencyRetentionMs),
      ]);
      const rateLimitWindows = await purgeUntilStopped('rate_limit_windows', 'window_start < ?', [
        new Date(now - janitorSchedule.rateLimitRetentionMs),
      ]);
      const eventLog = await sweepEventLog(db, now, now - EVENT_RETENTION_MS);
      const undeliveredRows = await purgeUntilStopped('webhook_undelivered', 'event_created_at < ?', [
        new Date(now - EVENT_RETENTION_MS),
      ]);
      const smsBodies = await db('outbox')
        .where({ kind: 'sms' })
        .whereNotNull('body')
        .where('created_at', '<', new Date(now - janitorSchedule.smsBodyRetentionMs))
        .where('created_at', '<', db.raw(`now() - ?::interval`, [`${janitorSchedule.smsBodyRetentionMs} milliseconds`]))
        .update({ body: null });
      const outboxMessages = await purgeUntilStopped('outbox', 'created_at < ?', [
        new Date(now - janitorSchedule.outboxRetentionMs),
      ]);
      return {
        idempotencyRecords,
        rateLimitWindows,
        events: eventLog.legacyEvents,
        smsBodies,
        outboxMessages,
        eventLog,
        undeliveredRows,
      };
    },
  };
}

export type JanitorActivities = ReturnType<typeof createJanitorActivities>;
