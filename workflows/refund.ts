import { proxyActivities } from '@temporalio/workflow';
import type { RefundActivities } from '../activities/refunds';
import type { RefundWorkflowInput } from '../src/temporal/session-messages';

const { settleRefund } = proxyActivities<RefundActivities>({
  startToCloseTimeout: '1 minute',
  // A vendor outage is retried (the vendor call carries the refund's id); a refusal settles it failed.
  retry: { maximumInterval: '10 minutes' },
  summary: 'refund at the vendor and settle the refund',
});

/** One per refund (workflow id = refund id): settles the requested refund at the vendor. */
export async function refundWorkflow({ refundId }: RefundWorkflowInput): Promise<string> {
  return (await settleRefund({ refundId })).status;
}
