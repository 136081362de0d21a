import type { Db } from '../src/db/knex';
import type { Clock } from '../src/lib/clock';
import type { AttemptRow } from '../src/checkout/attempts/attempt-row';
import { settleAttempt } from '../src/checkout/attempts/transitions';
import { defaultGateways, Gateways } from '../src/checkout/gateways';

export interface SettleAttemptInput {
  attemptId: string;
  outcome: 'succeeded' | 'failed' | 'canceled';
  reason?: string;
  /** The workflow's expiry timer has passed: a failure expires the reopened session at once. */
  expireIfDue: boolean;
}

export interface SettleAttemptResult {
  attemptStatus: string;
  /** The session's status afterwards (`missing` when there is no such attempt). */
  sessionStatus: string;
  changed: boolean;
}

/** Payment attempt activities: idempotent conditional writes that return the settled state. */
export function createAttemptActivities({
  db,
  clock,
  publicBaseUrl,
  gateways = defaultGateways,
}: {
  db: Db;
  clock: Clock;
  publicBaseUrl: string;
  gateways?: Gateways;
}) {
  return {
    /**
     * Settles a pending attempt and its session with their events (one transaction); a retry finds
     * it settled and writes nothing. The test gateway captures exactly the presented amount.
     */
    async settleAttempt(input: SettleAttemptInput): Promise<SettleAttemptResult> {
      const result = await settleAttempt(db, { ...input, now: clock(), publicBaseUrl });
      if (!result) return { attemptStatus: 'missing', sessionStatus: 'missing', changed: false };
      return { attemptStatus: result.attempt.status, sessionStatus: result.session.status, changed: result.changed };
    },

    /** Asks the vendor about a pending attempt (one re-check of the backoff) and records that it asked. */
    async recheckAttempt({
      attemptId,
    }: {
      attemptId: string;
    }): Promise<'pending' | 'succeeded' | 'failed' | 'settled'> {
      const [attempt]: AttemptRow[] = await db('payment_attempts')
        .where({ id: attemptId, status: 'pending' })
        .update({ checks: db.raw('checks + 1'), last_checked_at: clock() })
        .returning('*');
      if (!attempt) return 'settled';
      const gateway = Object.values(gateways).find((g) => g.name === attempt.gateway);
      if (!gateway) return 'pending';
      return gateway.check({
        id: attempt.id,
        mode: attempt.mode,
        presentedAmount: attempt.presented_amount,
        presentedCurrency: attempt.presented_currency,
      });
    },
  };
}

export type AttemptActivities = ReturnType<typeof createAttemptActivities>;
