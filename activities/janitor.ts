import type { Db } from '../src/db/knex';
import { EVENT_RETENTION_MS } from '../src/checkout/events';
import { janitorSchedule } from '../src/temporal/names';

export interface SweepResult {
  idempotencyRecords: number;
  rateLimitWindows: number;
  events: number;
}

/** Janitor activities: retention sweeps, each an idempotent DELETE of rows past their age. */
export function createJanitorActivities({ db }: { db: Db }) {
  return {
    /**
     * Deletes idempotency records older than 24 h, rate-limit windows older than a day and events
     * older than 30 days, as of
     * `nowMs`: the workflow's time, so a time-skipping test moves it.
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
      return { idempotencyRecords, rateLimitWindows, events };
    },
  };
}

export type JanitorActivities = ReturnType<typeof createJanitorActivities>;
