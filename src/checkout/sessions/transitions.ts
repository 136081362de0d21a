import { type Db, inTransaction } from '../../db/knex';
import { countSessionClosed } from '../../telemetry/checkout';
import { afterCommit } from '../../telemetry/metrics';
import type { KeyMode } from '../../keys/keys';
import { PendingHandoff, recordHandoff } from '../../temporal/handoffs';
import { EventType, recordEvent } from '../events';
import { SessionRow, sessionOut } from './session-row';

export interface TransitionResult {
  session: SessionRow;
  /** False when the session was no longer open: someone else won the race. */
  changed: boolean;
  /** The session workflow's `sessionSettled`, when `settledBy` asked for it and the session changed. */
  handoff?: PendingHandoff;
}

interface CloseInput {
  sessionId: string;
  scope?: { merchantId: string; mode: KeyMode };
  publicBaseUrl: string;
  /** The transition's time (the injected clock): `updated_at` and the event's `created_at`. */
  now: Date;
  /**
   * Who closes it, when that is not the session workflow itself: its handoff (`sessionSettled`,
   * to stop the timer) is written in the same transaction, for the caller to deliver after the commit.
   */
  settledBy?: string;
}

/**
 * Moves an open session to `to` with its event, in one transaction. The conditional UPDATE decides
 * races (timer, `/expire`, reconciliation, a payment, a shopper cancel): exactly one caller changes
 * the row and writes the event. Null when there is no such session in scope.
 */
async function closeOpenSession(
  db: Db,
  input: CloseInput & { to: 'expired' | 'canceled'; event: EventType },
): Promise<TransitionResult | null> {
  const run = async (trx: Db) => {
    const where = {
      id: input.sessionId,
      ...(input.scope ? { merchant_id: input.scope.merchantId, mode: input.scope.mode } : {}),
    };
    const [closed]: SessionRow[] = await trx('checkout_sessions')
      .where({ ...where, status: 'open' })
      .update({ status: input.to, updated_at: input.now })
      .returning('*');
    if (closed) {
      afterCommit(trx, () => countSessionClosed(input.to, closed.mode));
      await recordEvent(trx, {
        merchantId: closed.merchant_id,
        mode: closed.mode,
        type: input.event,
        object: sessionOut(closed, input.publicBaseUrl),
        now: input.now,
      });
      if (input.settledBy === undefined) return { session: closed, changed: true };
      const handoff = await recordHandoff(
        trx,
        { merchantId: closed.merchant_id, mode: closed.mode },
        { kind: 'session_settled', sessionId: closed.id, status: input.to, by: input.settledBy },
      );
      return { session: closed, changed: true, handoff };
    }
    const current: SessionRow | undefined = await trx('checkout_sessions').where(where).first();
    return current ? { session: current, changed: false } : null;
  };
  return inTransaction(db, run);
}

/** Expires an open session with its `checkout.session.expired` event (see closeOpenSession). */
export function expireOpenSession(db: Db, input: CloseInput): Promise<TransitionResult | null> {
  return closeOpenSession(db, { ...input, to: 'expired', event: 'checkout.session.expired' });
}

/** Cancels an open session (the shopper, on the page) with its `checkout.session.canceled` event. */
export function cancelOpenSession(db: Db, input: CloseInput): Promise<TransitionResult | null> {
  return closeOpenSession(db, { ...input, to: 'canceled', event: 'checkout.session.canceled' });
}
