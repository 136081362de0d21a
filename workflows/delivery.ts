import {
  condition,
  continueAsNew,
  makeContinueAsNewFunc,
  patched,
  proxyActivities,
  setHandler,
  setWorkflowOptions,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import type { DeliveryActivities } from '../activities/delivery';
import type { AttemptResult } from '../src/webhooks/attempt';
import {
  deliverSignal,
  DeliveryWorkflowInput,
  endpointDeletedSignal,
  endpointDeliveryWorkflowType,
  PendingDelivery,
  wakeSignal,
} from '../src/temporal/delivery';
import { DeliveryQueue } from '../src/webhooks/legacy-in-state-queue';
import { DISABLE_AFTER_FAILING_MS } from '../src/webhooks/schedule';
import type { endpointDeliveryWorkflow } from './delivery-endpoint';
import { patches } from './patches';
import { versioningBehaviors } from '../src/temporal/versioning';

/** Attempts per activity (sent concurrently), and activities in flight at once: at most 20 POSTs per endpoint. */
const BATCH_SIZE = 10;
const MAX_BATCHES_IN_FLIGHT = 2;
/** Continue as new past this many history events (the time-skipping server never suggests it). */
const DEFAULT_HISTORY_LIMIT = 5000;
/** Cancelled deliveries recorded per activity call. */
const CANCEL_BATCH = 500;
const RETRY_UNATTEMPTED_MS = 60_000;
/** Pending deliveries moved into Postgres per activity call. */
const ADOPT_CHUNK = 2000;

const { deliverBatch, recordCancelledDeliveries, disableFailingEndpoint } = proxyActivities<DeliveryActivities>({
  startToCloseTimeout: '1 minute', // 10-second POSTs sent at once, a DNS lookup and two short transactions
  retry: { maximumInterval: '1 minute' },
});

const keyOf = ({ eventId, generation, attemptNo }: PendingDelivery) => ({ eventId, generation, attemptNo });

setWorkflowOptions({ versioningBehavior: versioningBehaviors.deliveryWorkflow }, deliveryWorkflow);

/**
 * The previous delivery workflow type, registered until its runs are gone: a run that reaches new
 * code (patch `delivery-queue-to-postgres`) lets its batches in flight finish, moves its queue into
 * Postgres and continues as an `endpointDeliveryWorkflow`; runs replaying old histories keep the
 * behaviour below. Before that patch, one per webhook endpoint (workflow id = endpoint id): keeps the endpoint's pending deliveries as
 * data, runs those due in batches, schedules each failure's retry from the recorded
 * `next_retry_at`, disables the endpoint after 3 days of continuous failure, and on deletion records
 * every scheduled retry as `endpoint_deleted` and stops. Continues as new, carrying its queue.
 */
export async function deliveryWorkflow(input: DeliveryWorkflowInput): Promise<void> {
  const { endpointId, state, historyLimit = DEFAULT_HISTORY_LIMIT } = input;
  const queue = new DeliveryQueue(state);
  let failingSinceMs = state?.failingSinceMs ?? null;
  let deleted = false;
  let woken = false;
  let batchesInFlight = 0;

  setHandler(deliverSignal, ({ eventIds, generation }) => {
    const now = Date.now();
    for (const eventId of eventIds) if (queue.add(eventId, generation, now)) woken = true;
  });
  setHandler(endpointDeletedSignal, () => {
    deleted = true;
    woken = true;
  });
  // The new dispatcher's signal: wakes an old run so that it moves to Postgres.
  setHandler(wakeSignal, () => {
    woken = true;
  });

  const settle = (d: PendingDelivery, r: AttemptResult) => {
    if (r.outcome === 'failed' && r.nextRetryAtMs !== null) queue.retry(d, r.nextRetryAtMs);
    else queue.finish(d);
    if (r.outcome === 'deleted') deleted = true;
    if (r.outcome === 'delivered' || r.outcome === 'failed') failingSinceMs = r.failingSinceMs;
  };
  const launch = (batch: PendingDelivery[], attemptAtMs: number) => {
    batchesInFlight++;
    deliverBatch({ endpointId, attemptAtMs, deliveries: batch.map(keyOf) })
      .then(
        (results) => batch.forEach((d, i) => settle(d, results[i])),
        () => batch.forEach((d) => queue.putBack(d, Date.now() + RETRY_UNATTEMPTED_MS)), // only if cancelled
      )
      .finally(() => {
        batchesInFlight--;
        woken = true;
      });
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
    return info.continueAsNewSuggested || info.historyLength > historyLimit;
  };

  while (!deleted && !continueAsNewDue()) {
    if (patched(patches.deliveryQueueToPostgres)) {
      await condition(() => batchesInFlight === 0);
      const { adoptPendingDeliveries } = proxyActivities<DeliveryActivities>({
        startToCloseTimeout: '1 minute',
        retry: { maximumInterval: '1 minute' },
        summary: 'move pending deliveries into Postgres',
      });
      for (let pending = queue.drain(); pending.length > 0; pending = queue.drain()) {
        for (let i = 0; i < pending.length; i += ADOPT_CHUNK) {
          const chunk = pending.slice(i, i + ADOPT_CHUNK);
          await adoptPendingDeliveries({
            endpointId,
            pending: chunk.map((d) => [d.eventId, d.generation, d.attemptNo, d.dueAtMs]),
          });
        }
      }
      const next = makeContinueAsNewFunc<typeof endpointDeliveryWorkflow>({
        workflowType: endpointDeliveryWorkflowType,
      });
      return next({ endpointId, failingSinceMs, historyLimit: input.historyLimit });
    }
    const now = Date.now();
    while (batchesInFlight < MAX_BATCHES_IN_FLIGHT) {
      const batch: PendingDelivery[] = [];
      while (batch.length < BATCH_SIZE) {
        const due = queue.takeDue(now);
        if (!due) break;
        batch.push(due);
      }
      if (batch.length === 0) break;
      launch(batch, now);
    }
    const disableAt = failingSinceMs === null ? Infinity : failingSinceMs + DISABLE_AFTER_FAILING_MS;
    if (now >= disableAt) {
      ({ failingSinceMs } = await disableFailingEndpoint({ endpointId, nowMs: now }));
      continue;
    }
    if (batchesInFlight < MAX_BATCHES_IN_FLIGHT) wakeAt(queue.nextDueAtMs() ?? Infinity);
    wakeAt(disableAt);
    woken = false;
    await condition(() => woken);
  }

  await condition(() => batchesInFlight === 0);
  if (deleted) {
    for (let pending = queue.drain(); pending.length > 0; pending = queue.drain()) {
      for (let i = 0; i < pending.length; i += CANCEL_BATCH) {
        const deliveries = pending.slice(i, i + CANCEL_BATCH).map(keyOf);
        await recordCancelledDeliveries({ endpointId, error: 'endpoint_deleted', deliveries });
      }
    }
    return;
  }
  await continueAsNew<typeof deliveryWorkflow>({ ...input, state: { ...queue.snapshot(), failingSinceMs } });
}
