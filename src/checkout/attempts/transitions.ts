import type { Db } from '../../db/knex';
import { log } from '../../lib/log';
import { paymentAttempts, sessionsCompleted } from '../../telemetry/checkout';
import { afterCommit } from '../../telemetry/metrics';
import { PendingHandoff, recordHandoff } from '../../temporal/handoffs';
import { recordEvent } from '../events';
import type { SessionRow } from '../sessions/session-row';
import { sessionOut } from '../sessions/session-row';
import { expireOpenSession } from '../sessions/transitions';
import { AttemptRow, failedAttemptOut, paymentOut } from './attempt-row';
import { ATTEMPT_SETTLED_CHANNEL } from './attempt-stream-rules';

/** A new attempt's columns (the row before it is written). */
export type NewAttempt = Pick<
  AttemptRow,
  'id' | 'method' | 'gateway' | 'flow' | 'presented_amount' | 'presented_currency' | 'gateway_reference'
> & { fx_rate: number | null };

/** Why a session could not take an attempt: a payment is with a vendor, or it is not open (any more). */
export type Refusal = 'in_progress' | 'not_open';

/** The refusal for a session that the conditional write did not find open (and unexpired). */
async function refusal(trx: Db, sessionId: string): Promise<Refusal> {
  const current: SessionRow | undefined = await trx('checkout_sessions').where({ id: sessionId }).first();
  return current?.status === 'processing' ? 'in_progress' : 'not_open';
}

function attemptRow(session: SessionRow, a: NewAttempt, now: Date) {
  return {
    ...a,
    session_id: session.id,
    merchant_id: session.merchant_id,
    mode: session.mode,
    created_at: now,
    updated_at: now,
  };
}

const scopeOf = (session: SessionRow) => ({ merchantId: session.merchant_id, mode: session.mode });

/** Only an open session whose `expires_at` is still ahead takes an attempt. */
const openAndUnexpired = (trx: Db, sessionId: string, now: Date) =>
  trx('checkout_sessions').where({ id: sessionId, status: 'open' }).where('expires_at', '>', now);

/**
 * Sends a session to a vendor: in one transaction the open session reads `processing`, the
 * attempt is written `pending`, and so is its handoff to the session workflow (deliver it after
 * the commit). The conditional write decides races with a second attempt, the expiry, `/expire`
 * and a shopper cancel.
 */
export async function beginAttempt(
  db: Db,
  input: { session: SessionRow; attempt: NewAttempt; now: Date; merchantName?: string },
): Promise<{ attempt: AttemptRow; session: SessionRow; handoff: PendingHandoff } | Refusal> {
  return db.transaction(async (trx) => {
    const [session]: SessionRow[] = await openAndUnexpired(trx, input.session.id, input.now)
      .update({ status: 'processing', updated_at: input.now })
      .returning('*');
    if (!session) return refusal(trx, input.session.id);
    const [attempt]: AttemptRow[] = await trx('payment_attempts')
      .insert({ ...attemptRow(session, input.attempt, input.now), status: 'pending' })
      .returning('*');
    const handoff = await recordHandoff(trx, scopeOf(session), {
      kind: 'attempt_started',
      session: {
        sessionId: session.id,
        expiresAtMs: new Date(session.expires_at).getTime(),
        merchantId: session.merchant_id,
        merchantName: input.merchantName,
        mode: session.mode,
        referenceId: session.reference_id,
        amount: session.amount,
        currency: session.currency,
      },
      attempt: {
        attemptId: attempt.id,
        testGateway: attempt.gateway === 'test',
        presentedAmount: attempt.presented_amount,
        startedAtMs: new Date(attempt.created_at).getTime(),
      },
    });
    return { attempt, session, handoff };
  });
}

/**
 * Cash on delivery: the offline attempt completes the open session at once with
 * `requires_offline_collection` (nothing captured) and `checkout.session.completed`, and the
 * session workflow's handoff to stop its timer.
 */
export async function completeOffline(
  db: Db,
  input: { session: SessionRow; attempt: NewAttempt; now: Date; publicBaseUrl: string },
): Promise<{ attempt: AttemptRow; session: SessionRow; handoff: PendingHandoff } | Refusal> {
  return db.transaction(async (trx) => {
    const [locked]: SessionRow[] = await openAndUnexpired(trx, input.session.id, input.now).forUpdate().select('*');
    if (!locked) return refusal(trx, input.session.id);
    const [attempt]: AttemptRow[] = await trx('payment_attempts')
      .insert({ ...attemptRow(locked, input.attempt, input.now), status: 'succeeded', resolved_at: input.now })
      .returning('*');
    const [session]: SessionRow[] = await trx('checkout_sessions')
      .where({ id: locked.id })
      .update({
        status: 'completed',
        payment_status: 'requires_offline_collection',
        payment: JSON.stringify(paymentOut(attempt)),
        completed_at: input.now,
        updated_at: input.now,
      })
      .returning('*');
    await recordEvent(trx, {
      merchantId: session.merchant_id,
      mode: session.mode,
      type: 'checkout.session.completed',
      object: sessionOut(session, input.publicBaseUrl),
      now: input.now,
    });
    const handoff = await recordHandoff(trx, scopeOf(session), {
      kind: 'session_settled',
      sessionId: session.id,
      status: 'completed',
      by: 'cash on delivery',
    });
    afterCommit(trx, () => {
      paymentAttempts.inc({ mode: session.mode, method: attempt.method, outcome: 'succeeded' });
      sessionsCompleted.inc({ mode: session.mode, payment_status: session.payment_status });
    });
    return { attempt, session, handoff };
  });
}

export interface SettleInput {
  attemptId: string;
  outcome: 'succeeded' | 'failed' | 'canceled';
  /** `failure_reason` of a failed or canceled attempt. */
  reason?: string;
  /** What the vendor captured; the test gateway captures exactly the presented amount. */
  capturedAmount?: number;
  /** The session's `expires_at` has passed while the attempt was pending: a failure expires it too. */
  expireIfDue: boolean;
  now: Date;
  publicBaseUrl: string;
}

export interface SettleResult {
  attempt: AttemptRow;
  session: SessionRow;
  /** False when the attempt was already settled (a retry, or someone else won). */
  changed: boolean;
}

/**
 * Settles a pending attempt and moves its session, events included, in one transaction. Success
 * counts only when the captured amount equals the presented amount: the session completes `paid`
 * (`checkout.session.completed`). Anything else reopens it (`payment.attempt.failed` with
 * `failed_attempt`), and expires it at once when `expires_at` passed meanwhile. Idempotent: an
 * attempt no longer pending is returned as it is. Null when there is no such attempt. Its commit
 * notifies `attempt_settled` (the attempt id), which wakes the attempt's event streams.
 */
export async function settleAttempt(db: Db, input: SettleInput): Promise<SettleResult | null> {
  return db.transaction(async (trx) => {
    const [current]: AttemptRow[] = await trx('payment_attempts').where({ id: input.attemptId }).forUpdate();
    if (!current) return null;
    if (current.status !== 'pending') {
      const session: SessionRow = await trx('checkout_sessions').where({ id: current.session_id }).first();
      return { attempt: current, session, changed: false };
    }
    const captured = input.capturedAmount ?? current.presented_amount;
    const paid = input.outcome === 'succeeded' && captured === current.presented_amount;
    const status = input.outcome === 'succeeded' && !paid ? 'failed' : input.outcome;
    const failureReason = paid ? null : input.outcome === 'succeeded' ? 'amount_mismatch' : (input.reason ?? null);
    const [attempt]: AttemptRow[] = await trx('payment_attempts')
      .where({ id: current.id })
      .update({
        status,
        failure_reason: failureReason,
        ...(paid
          ? { captured_amount: captured, captured_currency: current.presented_currency, captured_at: input.now }
          : {}),
        resolved_at: input.now,
        updated_at: input.now,
      })
      .returning('*');
    // Delivered at commit, with the session's move below: the attempt's streams read both at once.
    await trx.raw('SELECT pg_notify(?, ?)', [ATTEMPT_SETTLED_CHANNEL, attempt.id]);
    const outcome = attempt.failure_reason === 'timeout' ? 'timeout' : attempt.status;
    afterCommit(trx, () => paymentAttempts.inc({ mode: attempt.mode, method: attempt.method, outcome }));

    const processing = trx('checkout_sessions').where({ id: attempt.session_id, status: 'processing' });
    const [session]: SessionRow[] = await (
      paid
        ? processing.update({
            status: 'completed',
            payment_status: 'paid',
            payment: JSON.stringify(paymentOut(attempt)),
            completed_at: input.now,
            updated_at: input.now,
          })
        : processing.update({ status: 'open', updated_at: input.now })
    ).returning('*');
    if (!session) {
      // A pending attempt always has a processing session (both are written together); never block the attempt on it.
      log.error('settled an attempt whose session was not processing', { attempt_id: attempt.id });
      const found: SessionRow = await trx('checkout_sessions').where({ id: attempt.session_id }).first();
      return { attempt, session: found, changed: true };
    }
    const event = { merchantId: session.merchant_id, mode: session.mode, now: input.now };
    if (paid) {
      afterCommit(trx, () => sessionsCompleted.inc({ mode: session.mode, payment_status: session.payment_status }));
      await recordEvent(trx, {
        ...event,
        type: 'checkout.session.completed',
        object: sessionOut(session, input.publicBaseUrl),
      });
      return { attempt, session, changed: true };
    }
    await recordEvent(trx, {
      ...event,
      type: 'payment.attempt.failed',
      object: { ...sessionOut(session, input.publicBaseUrl), failed_attempt: failedAttemptOut(attempt) },
    });
    if (!input.expireIfDue) return { attempt, session, changed: true };
    const expired = await expireOpenSession(trx, {
      sessionId: session.id,
      publicBaseUrl: input.publicBaseUrl,
      now: input.now,
    });
    return { attempt, session: expired?.session ?? session, changed: true };
  });
}
