import { ApplicationFailure } from '@temporalio/common';
import type { Db } from '../src/db/knex';
import type { Clock } from '../src/lib/clock';
import type { AttemptRow } from '../src/checkout/attempts/attempt-row';
import { defaultGateways, Gateways } from '../src/checkout/gateways';
import type { RefundRow } from '../src/checkout/refunds/refund-row';
import { RefundOutcome, settleRefund } from '../src/checkout/refunds/settle-refund';

/** The vendor's answer to a refund, or the refund's status when it was settled already. */
export type VendorAnswer = { status: 'settled'; current: string } | { status: 'asked'; outcome: RefundOutcome };

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
  /** Asks the refund's vendor, with the refund id as the vendor's idempotency key; throws on an outage (retried). */
  async function askVendor(refundId: string): Promise<VendorAnswer> {
    const refund: RefundRow | undefined = await db('refunds').where({ id: refundId }).first();
    if (!refund) throw ApplicationFailure.nonRetryable(`no refund ${refundId}`, 'RefundNotFound');
    if (refund.status !== 'requested') return { status: 'settled', current: refund.status };
    const attempt: AttemptRow = await db('payment_attempts').where({ id: refund.attempt_id }).first();
    const gateway = Object.values(gateways).find((g) => g.name === attempt.gateway);
    const outcome = gateway
      ? await gateway.refund({
          idempotencyKey: refund.id,
          attemptId: attempt.id,
          gatewayReference: attempt.gateway_reference,
          amount: refund.amount,
          currency: refund.currency,
        })
      : ({ status: 'failed', reason: 'gateway_not_configured' } as const);
    return {
      status: 'asked',
      outcome: outcome.status === 'succeeded' ? outcome : { status: 'failed', reason: outcome.reason },
    };
  }

  /** Settles the refund with `refund.succeeded` or `refund.failed`; a refund already settled is returned as it is. */
  async function record(refundId: string, outcome: RefundOutcome): Promise<{ status: string; changed: boolean }> {
    const settled = await settleRefund(db, { refundId, outcome, now: clock() });
    if (!settled) throw ApplicationFailure.nonRetryable(`no refund ${refundId}`, 'RefundNotFound');
    return { status: settled.refund.status, changed: settled.changed };
  }

  return {
    /** The vendor call alone (the refund workflow records its answer with `recordRefundOutcome`). */
    refundAtVendor: ({ refundId }: { refundId: string }): Promise<VendorAnswer> => askVendor(refundId),

    /** The settling write alone, with the vendor's answer; idempotent on the refund's status. */
    recordRefundOutcome: ({ refundId, outcome }: { refundId: string; outcome: RefundOutcome }) =>
      record(refundId, outcome),

    /**
     * Both in one activity, for refund workflows started before the two were apart (their histories
     * schedule this one). The vendor call carries the idempotency key here too.
     */
    async settleRefund({ refundId }: { refundId: string }): Promise<{ status: string; changed: boolean }> {
      const answer = await askVendor(refundId);
      if (answer.status === 'settled') return { status: answer.current, changed: false };
      return record(refundId, answer.outcome);
    },
  };
}

export type RefundActivities = ReturnType<typeof createRefundActivities>;
