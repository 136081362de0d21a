import type { Db } from '../src/db/knex';
import { janitorSchedule } from '../src/temporal/names';

export interface SweepResult {
  idempotencyRecords: number;
  rateLimitWindows: number;
}

/** Janitor activities: retention sweeps, each an idempotent DELETE of rows past their age. */
export function createJanitorActivities({ db }: { db: Db }) {
  return {
    /**
     * Deletes idempotency records older than 24 h and rate-limit windows older than a day, as of
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
      return { idempotencyRecords, rateLimitWindows };
    },
  };
}

export type JanitorActivities = ReturnType<typeof createJanitorActivities>;
