import type { Db } from '../../db/knex';
import type { KeyMode } from '../../keys/keys';
import { recordEvent } from '../events';
import { SessionRow, sessionOut } from './session-row';

export interface TransitionResult {
  session: SessionRow;
  /** False when the session was no longer open: someone else won the race. */
  changed: boolean;
}

/**
 * Expires an open session with its `checkout.session.expired` event, in one transaction. The
 * conditional UPDATE decides races (timer, `/expire`, reconciliation, a payment): exactly one
 * caller changes the row and writes the event. Null when there is no such session in scope.
 */
export async function expireOpenSession(
  db: Db,
  input: {
    sessionId: string;
    scope?: { merchantId: string; mode: KeyMode };
    publicBaseUrl: string;
    /** The transition's time (the injected clock): `updated_at` and the event's `created_at`. */
    now: Date;
  },
): Promise<TransitionResult | null> {
  const run = async (trx: Db) => {
    const where = {
      id: input.sessionId,
      ...(input.scope ? { merchant_id: input.scope.merchantId, mode: input.scope.mode } : {}),
    };
    const [expired]: SessionRow[] = await trx('checkout_sessions')
      .where({ ...where, status: 'open' })
      .update({ status: 'expired', updated_at: input.now })
      .returning('*');
    if (expired) {
      await recordEvent(trx, {
        merchantId: expired.merchant_id,
        mode: expired.mode,
        type: 'checkout.session.expired',
        object: sessionOut(expired, input.publicBaseUrl),
        now: input.now,
      });
      return { session: expired, changed: true };
    }
    const current: SessionRow | undefined = await trx('checkout_sessions').where(where).first();
    return current ? { session: current, changed: false } : null;
  };
  return db.isTransaction ? run(db) : db.transaction(run);
}
