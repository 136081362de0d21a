import {
  condition,
  continueAsNew,
  patched,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  setWorkflowOptions,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { DeliveryActivities, DueResult } from '../activities/delivery';
import {
  DEFAULT_MAX_IN_FLIGHT,
  deliverSignal,
  DeliverRequest,
  endpointDeletedSignal,
  EndpointDeliveryInput,
  wakeSignal,
  webhookActivityQueue,
} from '../src/temporal/delivery';
import { CLAIM_LEASE_MS } from '../src/webhooks/queue';
import { DISABLE_AFTER_FAILING_MS, NOTIFY_AFTER_FAILING_MS } from '../src/webhooks/schedule';
import { endpointIdKey, endpointStatusKey, merchantIdKey, modeKey } from '../src/temporal/search-attributes';
import { patches } from './patches';
import { versioningBehaviors } from '../src/temporal/versioning';

/**
 * Rows one `deliverDue` had in flight at most before patch delivery-one-batch (two activities
 * shared the default 20 slots); patched runs give one activity every free slot.
 */
const MAX_BATCH = 10;
/**
 * A `deliverDue` that attempted this many is followed at once by another, without waiting for a
 * wake: while events keep coming, a watching activity is always there to take them the moment
 * they are queued (a wake costs a signal, a workflow task and a new activity).
 */
const BUSY_ATTEMPTS = 5;
/** Continue as new past this many history events (the time-skipping server never suggests it). */
const DEFAULT_HISTORY_LIMIT = 5000;
/**
 * The same for runs started since patch `delivery-shorter-runs`. A worker that restarts replays
 * each busy endpoint's run from its first event, and at about 3 ms an event (the SDK records a
 * stack trace for every promise a workflow makes) a 4,000-event run took 13 s, past the 10-second
 * workflow task timeout: the task timed out, was replayed again, and the endpoint's deliveries
 * stopped for good (bench:webhooks, 2026-11-26, five such endpoints after a worker restart).
 */
const SHORT_HISTORY_LIMIT = 1000;
/** A run continues as new after a day, whatever it does (no run lives forever). */
const RUN_MAX_MS = 24 * 60 * 60 * 1000;
/** A run with nothing pending, no failure clock and no signal for this long ends; the next event starts another. */
const IDLE_END_MS = 60 * 60 * 1000;

type EndpointStatus = 'enabled' | 'failing' | 'disabled';

const hhmmss = (ms: number) => new Date(ms).toISOString().slice(11, 19);
const dateTime = (ms: number) => `${new Date(ms).toISOString().slice(0, 19).replace('T', ' ')} UTC`;

setWorkflowOptions({ versioningBehavior: versioningBehaviors.endpointDeliveryWorkflow }, endpointDeliveryWorkflow);

/**
 * One per webhook endpoint (workflow id = endpoint id). Owns only time: when to look at the
 * endpoint's queue in Postgres (`webhook_queue`, written by the dispatcher, redelivery and
 * replay), the failure clock (its 24-hour e-mail, its 3-day disable), and the deletion. Each `deliverDue` activity
 * claims due rows, sends them and moves each row on with its recorded attempt; at most
 * `max_in_flight` POSTs are in flight (`limit`s of the activities running). It carries no queue
 * across continue-as-new, continues as new daily and past a history bound, and ends after an idle hour.
 */
export async function endpointDeliveryWorkflow(input: EndpointDeliveryInput): Promise<void> {
  const { endpointId } = input;
  const historyLimit =
    input.historyLimit ?? (patched(patches.deliveryShorterRuns) ? SHORT_HISTORY_LIMIT : DEFAULT_HISTORY_LIMIT);
  const info = workflowInfo();
  const runStartedMs = Date.now();
  const activities = (summary: string) =>
    proxyActivities<DeliveryActivities>({
      taskQueue: webhookActivityQueue(info.taskQueue),
      // A batch of 10-second POSTs, two short transactions per round, 2 to 30 seconds of rounds.
      startToCloseTimeout: '1 minute',
      retry: { maximumInterval: '1 minute' },
      summary,
    });

  let failingSinceMs = input.failingSinceMs ?? null;
  /** The failure streak (its start) whose 24-hour e-mail this run has seen to (Postgres sends it once). */
  let noticedForMs = input.failingNoticedForMs ?? null;
  let maxInFlight = input.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
  let disabled = false;
  let deleted = false;
  /** Rows believed due and not taken yet (signalled counts, or "look" after a timer or a full batch). */
  let hint = 1; // a new run looks once
  /** The earliest moment a pending row is known to come due. */
  let nextDueAtMs: number | null = null;
  let pending: number | null = null;
  let reserved = 0;
  let batches = 0;
  let seq = 0;
  let woken = false;
  let idleSinceMs: number | null = null;
  const signalled: DeliverRequest[] = [];

  setHandler(wakeSignal, (request) => {
    hint += Math.max(1, request?.count ?? 1);
    woken = true;
  });
  setHandler(deliverSignal, (request) => {
    signalled.push(request);
    woken = true;
  });
  setHandler(endpointDeletedSignal, () => {
    deleted = true;
    woken = true;
  });

  const attributes = [
    { key: endpointIdKey, value: endpointId },
    ...(input.merchantId ? [{ key: merchantIdKey, value: input.merchantId }] : []),
    ...(input.mode ? [{ key: modeKey, value: input.mode }] : []),
  ].filter(({ key }) => info.typedSearchAttributes.get(key) === undefined);
  let shownStatus: EndpointStatus | undefined = info.typedSearchAttributes.get(endpointStatusKey) as EndpointStatus;
  const showStatus = () => {
    const status: EndpointStatus = disabled ? 'disabled' : failingSinceMs !== null ? 'failing' : 'enabled';
    if (status === shownStatus && attributes.length === 0) return;
    upsertSearchAttributes([...attributes.splice(0), { key: endpointStatusKey, value: status }]);
    shownStatus = status;
  };
  const earliest = (a: number | null, b: number | null) => (a === null ? b : b === null ? a : Math.min(a, b));

  const settle = (r: DueResult) => {
    failingSinceMs = r.failingSinceMs;
    maxInFlight = Math.max(1, r.maxInFlight || DEFAULT_MAX_IN_FLIGHT);
    disabled = r.endpoint === 'disabled';
    if (r.endpoint === 'deleted') deleted = true;
    pending = r.pending;
    nextDueAtMs = earliest(nextDueAtMs, r.nextDueAtMs);
    if (r.attempted >= BUSY_ATTEMPTS && patched(patches.deliveryKeepWatchingBusyEndpoint)) hint = Math.max(hint, 1);
  };
  const launch = (limit: number, nowMs: number) => {
    reserved += limit;
    batches++;
    const batch = `${info.runId}:${++seq}`;
    activities(`deliver up to ${limit} due webhooks`)
      .deliverDue({ endpointId, batch, nowMs, limit })
      .then(settle, () => {
        nextDueAtMs = earliest(nextDueAtMs, nowMs + CLAIM_LEASE_MS); // cancelled: its claims lapse
      })
      .finally(() => {
        reserved -= limit;
        batches--;
        woken = true;
      });
  };

  // Timers are never cancelled (the time-skipping test server mishandles cancelling a timer that
  // has just fired): one is armed only when none earlier is pending, and a needless wake is harmless.
  const armed = new Set<number>();
  const wakeAt = (atMs: number | null, summary: string) => {
    if (atMs === null || atMs === Infinity || [...armed].some((t) => t <= atMs)) return;
    armed.add(atMs);
    sleep(Math.max(1, atMs - Date.now()), { summary }).then(
      () => {
        armed.delete(atMs);
        woken = true;
      },
      () => undefined,
    );
  };
  const rollover = () => {
    const i = workflowInfo();
    return i.continueAsNewSuggested || i.historyLength > historyLimit || Date.now() - runStartedMs >= RUN_MAX_MS;
  };
  const describe = (now: number, disableAt: number) => {
    const parts = [
      batches > 0 ? `${batches} batch${batches === 1 ? '' : 'es'} sending (${reserved} of ${maxInFlight} slots)` : null,
      nextDueAtMs !== null ? `next due ${hhmmss(Math.max(now, nextDueAtMs))}` : null,
      pending !== null ? `${pending > 10_000 ? '10,000+' : pending} pending` : null,
      disabled ? 'endpoint disabled' : null,
      failingSinceMs !== null ? `failing since ${dateTime(failingSinceMs)}, disable due ${dateTime(disableAt)}` : null,
      idleSinceMs !== null ? `idle: waiting for events, ends ${dateTime(idleSinceMs + IDLE_END_MS)}` : null,
    ];
    setCurrentDetails(parts.filter((p) => p !== null).join('; '));
  };

  while (!deleted) {
    for (const request of signalled.splice(0)) {
      hint += await activities('queue events signalled by the previous release').queueDeliveries({
        endpointId,
        ...request,
      });
    }
    const now = Date.now();
    if (nextDueAtMs !== null && nextDueAtMs <= now) {
      hint = Math.max(hint, 1);
      nextDueAtMs = null; // the batch that takes them reports the next one
    }
    const wrapUp = rollover();
    while (!wrapUp && hint > 0 && reserved < maxInFlight) {
      const widest = patched(patches.deliveryOneBatch) ? maxInFlight : MAX_BATCH;
      const limit = Math.min(widest, maxInFlight - reserved);
      hint = Math.max(0, hint - limit);
      launch(limit, now);
    }
    showStatus();
    const disableAt = failingSinceMs === null ? Infinity : failingSinceMs + DISABLE_AFTER_FAILING_MS;
    const noticeAt =
      failingSinceMs === null || noticedForMs === failingSinceMs ? Infinity : failingSinceMs + NOTIFY_AFTER_FAILING_MS;
    const noticePatched = noticeAt !== Infinity && patched(patches.deliveryFailingNotice);
    if (noticePatched && now >= noticeAt && now < disableAt) {
      const streak = failingSinceMs;
      await activities('e-mail the merchant: failing for 24 hours').notifyFailingEndpoint({ endpointId, nowMs: now });
      noticedForMs = streak;
      continue;
    }
    if (now >= disableAt) {
      const r = await activities('disable the endpoint after 3 days of failures').disableFailingEndpoint({
        endpointId,
        nowMs: now,
      });
      failingSinceMs = r.failingSinceMs;
      disabled = disabled || r.disabled;
      continue;
    }
    if (wrapUp && batches === 0) break;
    const idle = batches === 0 && hint === 0 && nextDueAtMs === null && failingSinceMs === null;
    idleSinceMs = idle ? (idleSinceMs ?? now) : null;
    if (idleSinceMs !== null && now >= idleSinceMs + IDLE_END_MS && signalled.length === 0) return;
    wakeAt(nextDueAtMs, 'next webhook due');
    if (noticePatched) wakeAt(noticeAt, 'the 24-hour failure e-mail');
    wakeAt(disableAt, 'the 3-day failure clock runs out');
    wakeAt(runStartedMs + RUN_MAX_MS, 'daily continue-as-new');
    wakeAt(idleSinceMs === null ? null : idleSinceMs + IDLE_END_MS, 'idle: end the run');
    describe(now, disableAt);
    woken = false;
    await condition(() => woken);
  }

  await condition(() => batches === 0);
  if (deleted) {
    setCurrentDetails('endpoint deleted: recording its scheduled retries as endpoint_deleted');
    while (
      (await activities('record scheduled retries as endpoint_deleted').cancelPendingDeliveries({ endpointId })) > 0
    );
    return;
  }
  await continueAsNew<typeof endpointDeliveryWorkflow>({
    ...input,
    failingSinceMs,
    maxInFlight,
    failingNoticedForMs: noticedForMs,
  });
}
