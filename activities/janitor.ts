import type { Db } from '../src/db/knex';
import { EVENT_RETENTION_MS } from '../src/checkout/events';
import { janitorSchedule } from '../src/temporal/janitor';

export interface SweepResult {
  idempotencyRecords: number;
  rateLimitWindows: number;
  events: number;
  /** SMS bodies (OTP codes) cleared. */
  smsBodies: number;
  /** Outbox rows deleted. */
  outboxMessages: number;
}

/** Janitor activities: retention sweeps, each an idempotent DELETE of rows past their age. */
export function createJanitorActivities({ db }: { db: Db }) {
  return {
    /**
     * Deletes idempotency records older than 24 h, rate-limit windows older than a day, events and
     * outbox rows older than 30 days, and clears SMS bodies (OTP codes: sent, given up, test mode
     * or never sent) 10 minutes after they were queued, as of `nowMs`: the workflow's time, so a
     * time-skipping test moves it. A body is cleared only once it is 10 minutes old by the
     * database's clock too, so a clock run ahead never takes a code a shopper is still typing.
     * Hourly sweeps: a body is gone within 10 minutes and an hour (a sent one is masked at once).
     */
    async sweepRetention({ nowMs }: { nowMs: number }): Promise<SweepResult> {
      const now = nowMs;
      const idempotencyRecords = await db('idempotency_records')
        .where('created_at', '<', new Date(now - janitorSchedule.idempotencyRetentionMs))
        .delete();
      const rateLimitWindows = await db('rate_limit_windows')
        .where('window_start', '<', new Date(now - janitorSchedule.rateLimitRetentionMs))
        .delete();
      const events = await db('events')
        .where('created_at', '<', new Date(now - EVENT_RETENTION_MS))
        .delete();
      const smsBodies = await db('outbox')
        .where({ kind: 'sms' })
        .whereNotNull('body')
        .where('created_at', '<', new Date(now - janitorSchedule.smsBodyRetentionMs))
        .where('created_at', '<', db.raw(`now() - ?::interval`, [`${janitorSchedule.smsBodyRetentionMs} milliseconds`]))
        .update({ body: null });
      const outboxMessages = await db('outbox')
        .where('created_at', '<', new Date(now - janitorSchedule.outboxRetentionMs))
        .delete();
      return { idempotencyRecords, rateLimitWindows, events, smsBodies, outboxMessages };
    },
  };
}

export type JanitorActivities = ReturnType<typeof createJanitorActivities>;
