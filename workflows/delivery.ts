import { condition, continueAsNew, proxyActivities, setHandler, sleep, workflowInfo } from '@temporalio/workflow';
import type { DeliveryActivities } from '../activities/delivery';
import type { AttemptResult } from '../src/webhooks/attempts';
import {
  deliverSignal,
  DeliveryWorkflowInput,
  endpointDeletedSignal,
  PendingDelivery,
} from '../src/webhooks/delivery-messages';
import { DeliveryQueue } from '../src/webhooks/delivery-queue';
import { DISABLE_AFTER_FAILING_MS } from '../src/webhooks/schedule';

/** Attempts in flight at once per endpoint. */
const MAX_IN_FLIGHT = 10;
/** Continue as new past this many history events (the time-skipping server never suggests it). */
const HISTORY_LIMIT = 5000;
/** Cancelled deliveries recorded per activity call. */
const CANCEL_BATCH = 500;
const RETRY_UNATTEMPTED_MS = 60_000;

const { deliverAttempt, recordCancelledDeliveries, disableFailingEndpoint } = proxyActivities<DeliveryActivities>({
  startToCloseTimeout: '1 minute', // a 10-second POST, a DNS lookup and two short transactions
  retry: { maximumInterval: '1 minute' },
});

/**
 * One per webhook endpoint (workflow id = endpoint id): keeps the endpoint's pending deliveries as
 * data, runs those due (several at once), schedules each failure's retry from the recorded
 * `next_retry_at`, disables the endpoint after 3 days of continuous failure, and on deletion records
 * every scheduled retry as `endpoint_deleted` and stops. Continues as new, carrying its queue.
 */
export async function deliveryWorkflow({ endpointId, state }: DeliveryWorkflowInput): Promise<void> {
  const queue = new DeliveryQueue(state);
  let failingSinceMs = state?.failingSinceMs ?? null;
  let deleted = false;
  let woken = false;

  setHandler(deliverSignal, ({ eventId, generation }) => {
    if (queue.add(eventId, generation, Date.now())) woken = true;
  });
  setHandler(endpointDeletedSignal, () => {
    deleted = true;
    woken = true;
  });

  const settle = (d: PendingDelivery, r: AttemptResult) => {
    if (r.outcome === 'failed' && r.nextRetryAtMs !== null) queue.retry(d, r.nextRetryAtMs);
    else queue.finish(d);
    if (r.outcome === 'deleted') deleted = true;
    if (r.outcome === 'delivered' || r.outcome === 'failed') failingSinceMs = r.failingSinceMs;
    woken = true;
  };
  const launch = (d: PendingDelivery) => {
    const attempt = { endpointId, eventId: d.eventId, generation: d.generation, attemptNo: d.attemptNo };
    deliverAttempt({ ...attempt, attemptAtMs: Date.now() }).then(
      (r) => settle(d, r),
      () => {
        queue.putBack(d, Date.now() + RETRY_UNATTEMPTED_MS); // only if the activity was cancelled
        woken = true;
      },
    );
  };
  // Timers are never cancelled (the time-skipping test server mishandles cancelling a timer that
  // has just fired): one is armed only when none earlier is pending, and a needless wake is harmless.
  const armed = new Set<number>();
  const wakeAt = (atMs: number) => {
    if (atMs === Infinity || [...armed].some((t) => t <= atMs)) return;
    armed.add(atMs);
    sleep(Math.max(1, atMs - Date.now())).then(
      () => {
        armed.delete(atMs);
        woken = true;
      },
      () => undefined,
    );
  };
  const continueAsNewDue = () => {
    const info = workflowInfo();
    return info.continueAsNewSuggested || info.historyLength > HISTORY_LIMIT;
  };

  while (!deleted && !continueAsNewDue()) {
    const now = Date.now();
    while (queue.inFlightCount < MAX_IN_FLIGHT) {
      const due = queue.takeDue(now);
      if (!due) break;
      launch(due);
    }
    const disableAt = failingSinceMs === null ? Infinity : failingSinceMs + DISABLE_AFTER_FAILING_MS;
    if (now >= disableAt) {
      ({ failingSinceMs } = await disableFailingEndpoint({ endpointId, nowMs: now }));
      continue;
    }
    if (queue.inFlightCount < MAX_IN_FLIGHT) wakeAt(queue.nextDueAtMs() ?? Infinity);
    wakeAt(disableAt);
    woken = false;
    await condition(() => woken);
  }

  await condition(() => queue.inFlightCount === 0);
  if (deleted) {
    for (let batch = queue.drain(); batch.length > 0; batch = queue.drain()) {
      for (let i = 0; i < batch.length; i += CANCEL_BATCH) {
        const deliveries = batch.slice(i, i + CANCEL_BATCH).map(({ eventId, generation, attemptNo }) => ({
          eventId,
          generation,
          attemptNo,
        }));
        await recordCancelledDeliveries({ endpointId, error: 'endpoint_deleted', deliveries });
      }
    }
    return;
  }
  await continueAsNew<typeof deliveryWorkflow>({ endpointId, state: { ...queue.snapshot(), failingSinceMs } });
}
