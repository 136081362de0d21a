import type { Db } from '../src/db/knex';
import type { Clock } from '../src/lib/clock';
import { expireOpenSession } from '../src/checkout/sessions/transitions';
import type { AttemptStart } from '../src/temporal/session';
import { attemptClockStartMs } from '../src/checkout/attempts/attempt-row';

export interface ExpireResult {
  status: string;
  changed: boolean;
  /** For a `processing` session: the attempt with the vendor, which the workflow must see through first. */
  pendingAttempt?: AttemptStart;
}

/** Session activities: each a conditional write that a retry finds already done. */
export function createSessionActivities({ db, clock, publicBaseUrl }: { db: Db; clock: Clock; publicBaseUrl: string }) {
  return {
    /** Expires the session if it is still open (its event in the same transaction); returns its status. */
    async expireSession({ sessionId }: { sessionId: string }): Promise<ExpireResult> {
      const result = await expireOpenSession(db, { sessionId, publicBaseUrl, now: clock() });
      const status = result?.session.status ?? 'missing';
      if (status !== 'processing') return { status, changed: result?.changed ?? false };
      const pending = await db('payment_attempts')
        .where({ session_id: sessionId, status: 'pending' })
        .first('id', 'gateway', 'presented_amount', 'created_at', 'fast_forwarded_ms');
      return {
        status,
        changed: false,
        ...(pending
          ? {
              pendingAttempt: {
                attemptId: pending.id,
                testGateway: pending.gateway === 'test',
                presentedAmount: pending.presented_amount,
                startedAtMs: attemptClockStartMs(pending),
              },
            }
          : {}),
      };
    },
  };
}

export type SessionActivities = ReturnType<typeof createSessionActivities>;
