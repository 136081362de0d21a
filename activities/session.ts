import type { Db } from '../src/db/knex';
import type { Clock } from '../src/lib/clock';
import { expireOpenSession } from '../src/checkout/sessions/transitions';

/** Session activities: each a conditional write that a retry finds already done. */
export function createSessionActivities({ db, clock, publicBaseUrl }: { db: Db; clock: Clock; publicBaseUrl: string }) {
  return {
    /** Expires the session if it is still open (its event in the same transaction); returns its status. */
    async expireSession({ sessionId }: { sessionId: string }): Promise<{ status: string; changed: boolean }> {
      const result = await expireOpenSession(db, { sessionId, publicBaseUrl, now: clock() });
      return { status: result?.session.status ?? 'missing', changed: result?.changed ?? false };
    },
  };
}

export type SessionActivities = ReturnType<typeof createSessionActivities>;
