import { ApplicationFailure } from '@temporalio/common';
import type { Db } from '../src/db/knex';
import type { Clock } from '../src/lib/clock';
import type { AttemptRow } from '../src/checkout/attempts/attempt-row';
import { defaultGateways, Gateways } from '../src/checkout/gateways';
import type { RefundRow } from '../src/checkout/refunds/refund-row';
import { settleRefund } from '../src/checkout/refunds/settle-refund';

/** Refund activities: the vendor call and the settling write, idempotent on the refund's status. */
export function createRefundActivities({
  db,
  clock,
  gateways = defaultGateways,
}: {
  db: Db;
  clock: Clock;
  gateways?: Gateways;
}) {
  return {
    /**
     * Refunds at the vendor and settles the refund with `refund.succeeded` or `refund.failed`; a
     * refund already settled is returned as it is. A vendor outage throws and is retried.
     */
    async settleRefund({ refundId }: { refundId: string }): Promise<{ status: string; changed: boolean }> {
      const refund: RefundRow | undefined = await db('refunds').where({ id: refundId }).first();
      if (!refund) throw ApplicationFailure.nonRetryable(`no refund ${refundId}`, 'RefundNotFound');
      if (refund.status !== 'requested') return { status: refund.status, changed: false };
      const attempt: AttemptRow = await db('payment_attempts').where({ id: refund.attempt_id }).first();
      const gateway = Object.values(gateways).find((g) => g.name === attempt.gateway);
      const outcome = gateway
        ? await gateway.refund({
            attemptId: attempt.id,
            gatewayReference: attempt.gateway_reference,
            amount: refund.amount,
            currency: refund.currency,
          })
        : ({ status: 'failed', reason: 'gateway_not_configured' } as const);
      const settled = await settleRefund(db, {
        refundId,
        outcome: outcome.status === 'succeeded' ? outcome : { status: 'failed', reason: outcome.reason },
        now: clock(),
      });
      return { status: settled!.refund.status, changed: settled!.changed };
    },
  };
}

export type RefundActivities = ReturnType<typeof createRefundActivities>;
