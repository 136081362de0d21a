/**
 * A workflow for test/integration/fencing.test.ts only (bundled by its own worker): runs the
 * endpoint's 3-day disable as one activity attempt with a short start-to-close timeout, so a test
 * can hold the activity past its deadline in real time.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { DeliveryActivities } from '../../activities/delivery';

export async function disableWithinDeadline(input: {
  endpointId: string;
  nowMs: number;
  timeoutMs: number;
}): Promise<{ disabled: boolean; failingSinceMs: number | null }> {
  const { disableFailingEndpoint } = proxyActivities<DeliveryActivities>({
    startToCloseTimeout: input.timeoutMs,
    retry: { maximumAttempts: 1 },
    summary: 'disable the endpoint (fencing test)',
  });
  return disableFailingEndpoint({ endpointId: input.endpointId, nowMs: input.nowMs });
}
