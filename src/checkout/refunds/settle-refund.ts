import { refunds } from '../../telemetry/checkout';
import { afterCommit } from '../../telemetry/metrics';
import type { Db } from '../../db/knex';
import { recordEvent } from '../events';
import type { SessionRow } from '../sessions/session-row';
import { RefundRow, refundOut } from './refund-row';

export type RefundOutcome = { status: 'succeeded'; gatewayReference: string } | { status: 'failed'; reason: string };

/**
 * Settles a requested refund with its event, in one transaction. A success adds to the session's
 * `refunded_amount` and moves its payment status to `partially_refunded`, or `refunded` once all
 * that was captured is back. Idempotent: a refund no longer requested is returned as it is.
 */
export async function settleRefund(
  db: Db,
  input: { refundId: string; outcome: RefundOutcome; now: Date },
): Promise<{ refund: RefundRow; changed: boolean } | null> {
  return db.transaction(async (trx) => {
    const succeeded = input.outcome.status === 'succeeded';
    const [refund]: RefundRow[] = await trx('refunds')
      .where({ id: input.refundId, status: 'requested' })
      .update({
        status: input.outcome.status,
        gateway_reference: input.outcome.status === 'succeeded' ? input.outcome.gatewayReference : null,
        failure_reason: input.outcome.status === 'failed' ? input.outcome.reason : null,
        updated_at: input.now,
      })
      .returning('*');
    if (!refund) {
      const current: RefundRow | undefined = await trx('refunds').where({ id: input.refundId }).first();
      return current ? { refund: current, changed: false } : null;
    }
    afterCommit(trx, () => refunds.inc({ mode: refund.mode, outcome: refund.status }));
    if (succeeded) {
      const session: SessionRow = await trx('checkout_sessions').where({ id: refund.session_id }).forUpdate().first();
      const refunded = session.refunded_amount + refund.amount;
      const captured = Number((session.payment as { captured_amount: number }).captured_amount);
      await trx('checkout_sessions')
        .where({ id: session.id })
        .update({
          refunded_amount: refunded,
          payment_status: refunded >= captured ? 'refunded' : 'partially_refunded',
          updated_at: input.now,
        });
    }
    await recordEvent(trx, {
      merchantId: refund.merchant_id,
      mode: refund.mode,
      type: succeeded ? 'refund.succeeded' : 'refund.failed',
      object: refundOut(refund),
      now: input.now,
    });
    return { refund, changed: true };
  });
}
