import type { Db } from '../../db/knex';
import { ApiError } from '../../http/errors';
import { canonicalJson, sha256Hex } from '../../lib/hash';
import { newId } from '../../lib/ids';
import { handOff, recordHandoff } from '../../temporal/handoffs';
import { isObjectId } from '../ids';
import { findMethod } from '../methods';
import type { RefundIn } from '../schemas';
import type { MerchantScope, SessionDeps } from '../sessions/deps';
import type { SessionRow } from '../sessions/session-row';
import type { RefundRow } from './refund-row';

/** `reason` when the merchant gives none. */
export const DEFAULT_REFUND_REASON = 'requested_by_customer';

export interface Payment {
  attempt_id: string;
  method: string;
  captured_amount: number | null;
  captured_currency: string | null;
}

/** What the session's refunds hold of its capture: every refund requested or settled (a failed one gives its amount back). */
export async function reservedAmount(db: Db, sessionId: string): Promise<number> {
  const [{ reserved }] = await db('refunds')
    .where({ session_id: sessionId })
    .whereIn('status', ['requested', 'succeeded'])
    .sum({ reserved: 'amount' });
  return Number(reserved ?? 0);
}

const notRefundable = (message: string) => new ApiError(422, 'method_not_refundable', message);

/**
 * `POST /v1/refunds`: asks the session's vendor to give back part or all of what it captured. In
 * one transaction, under a lock on the session row, the refund is checked against what remains
 * (captured minus every refund requested or settled), so concurrent refunds never exceed the
 * captured amount; it is written `requested`, and its workflow settles it at the vendor.
 * A create run again with the same Idempotency-Key and the same request (concurrently, after a
 * 5xx, or after the 24-hour idempotency record is gone) finds its refund; the same key with another
 * request after 24 hours is a fresh key and makes its own.
 */
export async function createRefund(
  deps: SessionDeps,
  scope: MerchantScope,
  input: RefundIn,
  idempotencyKey: string,
): Promise<RefundRow> {
  return (await requestRefund(deps, scope, input, idempotencyKey)).refund;
}

/**
 * `createRefund`, saying whether the refund was made now or found (`replayed`: an earlier create
 * with the same key and request made it). With `keyNamesOneRequest` (the console's refund form,
 * which has no idempotency layer in front of it), a key already used with another request is
 * refused (409 `idempotency_key_conflict`, as the API's idempotency layer answers within its 24
 * hours), checked under a transaction lock on the key: two posts of one key with different
 * amounts cannot both pass.
 */
export async function requestRefund(
  deps: SessionDeps,
  scope: MerchantScope,
  input: RefundIn,
  idempotencyKey: string,
  opts: { keyNamesOneRequest?: boolean } = {},
): Promise<{ refund: RefundRow; replayed: boolean }> {
  const notFound = () => ApiError.notFound('session_not_found', 'No such checkout session.');
  if (!isObjectId(input.session_id)) throw notFound();
  const now = deps.clock();
  const requestHash = sha256Hex(canonicalJson(input));
  const { refund, handoff } = await deps.db.transaction(async (trx: Db) => {
    if (opts.keyNamesOneRequest) {
      // Held to the commit, taken before the session's row lock by every caller that takes it.
      await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [
        `refund-key:${scope.merchantId}:${scope.mode}:${idempotencyKey}`,
      ]);
      const other = await trx('refunds')
        .where({ merchant_id: scope.merchantId, mode: scope.mode, idempotency_key: idempotencyKey })
        .whereNot({ request_hash: requestHash })
        .first('id');
      if (other)
        throw ApiError.conflict(
          'idempotency_key_conflict',
          'This Idempotency-Key was used with another body or route.',
        );
    }
    const session: SessionRow | undefined = await trx('checkout_sessions')
      .where({ id: input.session_id, merchant_id: scope.merchantId, mode: scope.mode })
      .forUpdate()
      .first();
    if (!session) throw notFound();
    const earlier: RefundRow | undefined = await trx('refunds')
      .where({
        merchant_id: scope.merchantId,
        mode: scope.mode,
        idempotency_key: idempotencyKey,
        request_hash: requestHash,
      })
      .first();
    if (earlier) return { refund: earlier, handoff: null };

    const payment = session.payment as Payment | null;
    if (payment && payment.captured_amount === null) {
      throw notRefundable('Nothing was captured online (cash on delivery): refund the shopper offline.');
    }
    if (!payment || session.status !== 'completed' || payment.captured_currency === null) {
      throw ApiError.conflict(
        'session_not_open',
        'Nothing is captured on this session, so there is nothing to refund.',
      );
    }
    const capability = findMethod(payment.method)?.capabilities.refunds ?? 'none';
    if (capability === 'none') throw notRefundable(`${payment.method} cannot refund through the API.`);

    const reserved = await reservedAmount(trx, session.id);
    const remaining = payment.captured_amount! - reserved;
    if (capability === 'full_only' && (reserved > 0 || input.amount !== payment.captured_amount)) {
      throw notRefundable(`${payment.method} refunds only the full captured amount, once.`);
    }
    if (input.amount > remaining) {
      throw new ApiError(
        409,
        'refund_exceeds_captured',
        `The refund exceeds what remains captured: ${remaining} ${payment.captured_currency} remains refundable.`,
        [{ field: 'amount', issue: 'exceeds_captured' }],
      );
    }
    const [row]: RefundRow[] = await trx('refunds')
      .insert({
        id: newId('re', scope.mode === 'test' ? 'test' : undefined),
        merchant_id: scope.merchantId,
        mode: scope.mode,
        session_id: session.id,
        attempt_id: payment.attempt_id,
        amount: input.amount,
        currency: payment.captured_currency,
        reason: input.reason ?? DEFAULT_REFUND_REASON,
        initiated_by: 'merchant',
        status: 'requested',
        metadata: JSON.stringify(input.metadata ?? {}),
        idempotency_key: idempotencyKey,
        request_hash: requestHash,
        created_at: now,
        updated_at: now,
      })
      .returning('*');
    // The workflow that settles it, handed off in the same transaction: a refund is never left `requested`.
    const start = {
      refundId: row.id,
      sessionId: row.session_id,
      merchantId: row.merchant_id,
      merchantName: scope.merchantName,
      mode: row.mode,
      amount: row.amount,
      currency: row.currency,
    };
    return { refund: row, handoff: await recordHandoff(trx, scope, { kind: 'refund_start', refund: start }) };
  });
  if (handoff) await handOff(deps, [handoff]);
  return { refund, replayed: handoff === null };
}
