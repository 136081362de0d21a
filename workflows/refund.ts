import { patched, proxyActivities, setCurrentDetails, setWorkflowOptions } from '@temporalio/workflow';
import type { RefundActivities } from '../activities/refunds';
import type { RefundWorkflowInput } from '../src/temporal/refund';
import { patches } from './patches';
import { versioningBehaviors } from '../src/temporal/versioning';

// A vendor outage is retried (the vendor call carries the refund id as its idempotency key, so a
// retry after a timeout cannot refund twice); a refusal is an answer, settled as failed.
const retry = { maximumInterval: '10 minutes' } as const;
const { settleRefund } = proxyActivities<RefundActivities>({
  startToCloseTimeout: '1 minute',
  retry,
  summary: 'refund at the vendor and settle the refund',
});
const { refundAtVendor } = proxyActivities<RefundActivities>({
  startToCloseTimeout: '1 minute',
  retry,
  summary: 'ask the vendor to refund (idempotency key: the refund id)',
});
const { recordRefundOutcome } = proxyActivities<RefundActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { maximumInterval: '1 minute' },
  summary: "settle the refund with the vendor's answer",
});

setWorkflowOptions({ versioningBehavior: versioningBehaviors.refundWorkflow }, refundWorkflow);

/** One per refund (workflow id = refund id): refunds at the vendor, then settles the refund in Postgres. */
export async function refundWorkflow({ refundId }: RefundWorkflowInput): Promise<string> {
  if (!patched(patches.refundVendorCallApart)) return (await settleRefund({ refundId })).status;
  // Apart, so a failed write is retried on its own and never calls the vendor again.
  setCurrentDetails(`refund ${refundId}: waiting for the vendor's answer`);
  const answer = await refundAtVendor({ refundId });
  if (answer.status === 'settled') return answer.current;
  setCurrentDetails(`refund ${refundId}: vendor answered ${answer.outcome.status}; recording it`);
  return (await recordRefundOutcome({ refundId, outcome: answer.outcome })).status;
}
