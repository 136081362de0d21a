import { eventOut, EventRow, eventsByIds, withClaimedEvents } from '../src/checkout/events';
import type { Db } from '../src/db/knex';
import type { Clock } from '../src/lib/clock';
import { log } from '../src/lib/log';
import { type AttemptKey, attemptKey, type AttemptResult, droppedResult } from '../src/webhooks/attempt';
import {
  AttemptMade,
  disableIfStillFailing,
  notifyIfFailing,
  recordCancelled,
  recordedAttempts,
  recordWithEndpoint,
} from '../src/webhooks/record';
import type { EndpointRow } from '../src/webhooks/endpoint-row';
import {
  adopt,
  advance,
  claimDue,
  type ClaimedKey,
  dropClaimed,
  enqueue,
  queueState,
  stillClaimed,
  takePending,
} from '../src/webhooks/queue';
import { activityDeadline, assertBeforeDeadline, StaleClaimError } from '../src/temporal/activity-deadline';
import { type FenceSite, fenced } from '../src/telemetry/fencing';
import type { WebhookRuntime } from '../src/webhooks/runtime';
import { DELIVERY_TIMEOUT_MS } from '../src/webhooks/schedule';
import { inStoredTrace } from '../src/telemetry/propagation';
import { deliveryAgent, postWebhook, SendResult } from '../src/webhooks/send';
import { webhookHeaders } from '../src/webhooks/sign';
import { checkWebhookUrl, CheckedTarget, UrlCheck } from '../src/webhooks/url-safety';
import type { QueueNotices } from '../src/webhooks/queue-announce';
import { startWatching, stopWatching } from '../src/webhooks/watches';

/** How long one `deliverDue` keeps taking newly due rows before it reports back to its workflow. */
const DELIVER_DUE_BUDGET_MS = 2000;
/**
 * While its endpoint keeps getting events, a `deliverDue` keeps watching (and taking them) until
 * this long after the last delivery it recorded, up to `WATCH_MAX_MS` in all: an endpoint with an event
 * every few seconds costs one activity per half minute, not a wake signal, two workflow tasks and
 * an activity per event. Granted only while at most `LONG_WATCH_SHARE` of the worker's delivery
 * slots are taken, so that an endpoint whose activity waits for a slot still finds one within a
 * budget's time; never after a failed attempt (its workflow's failure clock sees it at once).
 */
const WATCH_IDLE_MS = 10_000;
/** Within the workflow's 1-minute start-to-close: the watch, a 10-second POST in flight, its recording. */
const WATCH_MAX_MS = 30_000;
const LONG_WATCH_SHARE = 0.75;
/**
 * How long its watch is recorded for (src/webhooks/watches.ts): the budget and the recording of
 * the POSTs in flight (the whole `WATCH_MAX_MS` once the watch is extended); it ends earlier when
 * the activity does, and lapses by itself if it dies.
 */
const WATCH_LEASE_MS = DELIVER_DUE_BUDGET_MS + 2000;
const LONG_WATCH_LEASE_MS = WATCH_MAX_MS + 2000;
/** A recording pass waits up to this long for more POSTs to finish, unless this many wait or none is in flight. */
const RECORD_GATHER_MS = 10;
const RECORD_GATHER_ROWS = 50;
/** Pending rows counted for the workflow's details (beyond it, "10,000+"). */
const COUNT_PENDING_UP_TO = 10_001;
/** Rows cancelled per transaction when an endpoint is gone, and per activity call. */
const CANCEL_CHUNK = 2000;
const CANCEL_PER_CALL = 50_000;

/** What one `deliverDue` did, and the endpoint and its queue as it left them. */
export interface DueResult {
  attempted: number;
  delivered: number;
  failed: number;
  /** The endpoint as found: `deleted` means its pending rows were recorded `endpoint_deleted`. */
  endpoint: 'enabled' | 'disabled' | 'deleted';
  /** The endpoint's failure clock (null while healthy, disabled or gone). */
  failingSinceMs: number | null;
  /** When the earliest pending row is due (a claim's lapse included), or null when none is pending. */
  nextDueAtMs: number | null;
  /** Pending rows, counted up to 10,001. */
  pending: number;
  /** The endpoint's concurrency setting. */
  maxInFlight: number;
}

export interface DeliveryActivityDeps {
  db: Db;
  /** The worker's LISTEN on queued rows: `deliverDue` then waits for its endpoint's next rows within its budget. */
  queueNotices?: QueueNotices;
  /** The wall clock: signature timestamps and the rotation overlap (set by the API on the same clock). */
  clock: Clock;
  webhooks: WebhookRuntime;
  /**
   * Aborted when the worker process stops: `deliverDue` claims no more rows, finishes and records
   * the POSTs in flight and returns (its workflow runs the next one on another worker).
   */
  stopping?: AbortSignal;
  /**
   * The worker's delivery activity slots (`WEBHOOK_ACTIVITY_SLOTS`): with them and `queueNotices`,
   * a busy endpoint's `deliverDue` keeps watching past its budget while slots are spare (`WATCH_IDLE_MS`).
   */
  activitySlots?: number;
}

/** Webhook delivery activities: each records what it did, so a retry returns the recorded result. */
export function createDeliveryActivities(deps: DeliveryActivityDeps) {
  const { db, clock, webhooks, queueNotices, stopping, activitySlots } = deps;
  const agent = deliveryAgent(webhooks.extraCa);
  /** `deliverDue` activities running in this process (each holds one of the `activitySlots`). */
  let delivering = 0;
  const longWatchRoom = () => activitySlots !== undefined && delivering <= Math.floor(activitySlots * LONG_WATCH_SHARE);

  /** The secrets that sign now: the current one, and the previous one within 24 hours of a rotation. */
  function signingSecrets(endpoint: EndpointRow): string[] {
    const secrets = [webhooks.cipher.decrypt(endpoint.secret_ciphertext, endpoint.id)];
    const previousUntil = endpoint.previous_secret_expires_at?.getTime() ?? 0;
    if (endpoint.previous_secret_ciphertext && previousUntil > clock().getTime()) {
      secrets.push(webhooks.cipher.decrypt(endpoint.previous_secret_ciphertext, endpoint.id));
    }
    return secrets;
  }

  /** Signs (a timestamp of its own) and POSTs one event to the checked address. */
  function sendOne(target: CheckedTarget, secrets: string[], event: EventRow): Promise<SendResult> {
    const body = JSON.stringify(eventOut(event));
    const headers = webhookHeaders(event, body, secrets, Math.floor(clock().getTime() / 1000));
    // In the trace that recorded the event (the request or activity behind it), not the workflow's.
    const attributes = { 'webhook.event_id': event.id, 'webhook.event_type': event.type };
    return inStoredTrace(event.traceparent, 'webhook delivery', attributes, () =>
      postWebhook(target, body, headers, { agent, timeoutMs: DELIVERY_TIMEOUT_MS }),
    );
  }

  /**
   * What each attempt comes to: refused before sending (the endpoint gone or disabled; an event of
   * another tenant, a dispatcher bug, is treated as if the endpoint were gone), or sent, the target
   * checked once for the batch unless `check` already holds that check.
   */
  async function attempt(
    endpoint: EndpointRow | undefined,
    todo: Array<AttemptKey & { event: EventRow }>,
    check?: UrlCheck,
    onSent?: (made: AttemptMade) => void | Promise<void>,
  ): Promise<AttemptMade[]> {
    const refuse = (rows: typeof todo, error: string) =>
      rows.map((a) => ({ ...a, statusCode: null, error, attempted: false }));
    if (!endpoint) return refuse(todo, 'endpoint_deleted');
    const sameTenant = (e: EventRow) => e.merchant_id === endpoint.merchant_id && e.mode === endpoint.mode;
    const mine = todo.filter((a) => sameTenant(a.event));
    const others = refuse(
      todo.filter((a) => !sameTenant(a.event)),
      'endpoint_deleted',
    );
    if (endpoint.status !== 'enabled') return [...refuse(mine, 'endpoint_disabled'), ...others];
    if (mine.length === 0) return others;
    const target = check ?? (await checkWebhookUrl(endpoint.url, webhooks)); // DNS may have changed since registration
    if (!target.ok)
      return [
        ...mine.map((a) => ({ ...a, statusCode: null, error: target.issue, attempted: true, durationMs: null })),
        ...others,
      ];
    const secrets = signingSecrets(endpoint);
    const sent = await Promise.all(
      mine.map(async (a) => {
        const made = { ...a, ...(await sendOne(target.target, secrets, a.event)), attempted: true };
        await onSent?.(made);
        return made;
      }),
    );
    return [...sent, ...others];
  }

  /**
   * Runs `write` (whose transaction calls assertBeforeDeadline last) and, when the activity was past
   * its deadline so the write rolled back, counts it at `site` and fails the attempt (the server
   * has already timed it out; its retry decides again).
   */
  async function fencedByDeadline<T>(site: FenceSite, ids: Record<string, unknown>, write: () => Promise<T>) {
    try {
      return await write();
    } catch (err) {
      if (err instanceof StaleClaimError) fenced(site, 1, { write: 'activity', ...ids });
      throw err;
    }
  }

  const loadEndpoint = (endpointId: string) =>
    db('webhook_endpoints').where({ id: endpointId }).first() as Promise<EndpointRow | undefined>;
  const clockOf = (endpoint: EndpointRow) =>
    endpoint.status === 'enabled' && endpoint.failing_since ? new Date(endpoint.failing_since).getTime() : null;

  /**
   * Records every pending row of a deleted endpoint as `endpoint_deleted`, up to `max` (fewer when
   * the worker stops: its workflow asks again until none is left); returns how many.
   */
  async function cancelPending(endpointId: string, max: number): Promise<number> {
    let total = 0;
    // Checked after a full chunk only, so a call cut short has cancelled some (0 means none is left).
    while (total < max && !(total > 0 && stopping?.aborted)) {
      const n = await db.transaction(async (trx) => {
        const keys = await takePending(trx, endpointId, CANCEL_CHUNK);
        await recordCancelled(trx, endpointId, 'endpoint_deleted', keys);
        return keys.length;
      });
      total += n;
      if (n < CANCEL_CHUNK) break;
    }
    // A deleted endpoint leaves nothing to redeliver to: its events no longer list as undelivered.
    let removed: number;
    do {
      const { rowCount } = await db.raw(
        `DELETE FROM webhook_undelivered WHERE ctid = ANY(ARRAY(
           SELECT ctid FROM webhook_undelivered WHERE endpoint_id = ? LIMIT ?))`,
        [endpointId, CANCEL_CHUNK],
      );
      removed = rowCount ?? 0;
    } while (removed === CANCEL_CHUNK);
    return total;
  }

  return {
    /**
     * The endpoint's due deliveries from the Postgres queue, for about 2 seconds, or up to 30 while
     * its endpoint keeps getting events and the worker has slots to spare (`WATCH_IDLE_MS`), or until
     * the worker stops (then it claims nothing more, and finishes and records what it sent), with up to
     * `limit` POSTs in flight all along (`max_in_flight` when that is lower): claims due rows for
     * `batch` as of `nowMs` (workflow time, moved on by the time spent here) as slots free up,
     * sends each at once, and records finished attempts, moving their rows on in the same
     * transaction, while later ones are still sending. With a slot free and nothing due it waits,
     * within those seconds, for the dispatcher to announce rows for the endpoint and claims them at
     * once. A retry of the same batch sends the rows it still holds again (same event id, same
     * attempt) before anything else. When the endpoint is gone, records every pending row as
     * `endpoint_deleted`.
     */
    async deliverDue(input: { endpointId: string; batch: string; nowMs: number; limit: number }): Promise<DueResult> {
      const { endpointId, batch, limit } = input;
      const started = Date.now();
      /** Until when it takes new rows: the budget, moved on while the endpoint keeps getting events. */
      let endsAtMs = started + DELIVER_DUE_BUDGET_MS;
      let longLease = false;
      const left = () => endsAtMs - Date.now();
      // Workflow time (ahead of the wall clock where tests skip time), never behind the wall clock:
      // rows the dispatcher queues are due at their commit.
      const at = () => Math.max(input.nowMs + (Date.now() - started), Date.now());
      const totals = { attempted: 0, delivered: 0, failed: 0 };
      let checked: { url: string; check: Awaited<ReturnType<typeof checkWebhookUrl>> } | undefined;
      let firstClaim = true;
      /** Claimed and not yet sent: the POSTs in flight, which `limit` bounds. */
      let sending = 0;
      /** Claimed and not yet recorded (sending, or sent and waiting for the recorder). */
      let unrecorded = 0;
      /** Attempts made and waiting to be recorded, each with the moment it was claimed at and its claim's lease end. */
      const made: Array<AttemptMade & { atMs: number; leaseEndMs: number }> = [];
      /** This attempt's own deadline: past it, the server has retried the batch elsewhere. */
      const deadline = activityDeadline();
      const fencedWrites = (site: FenceSite, keys: readonly AttemptKey[], write: string) =>
        fenced(site, keys.length, {
          write,
          endpoint_id: endpointId,
          batch,
          event_ids: keys.slice(0, 20).map((k) => k.eventId),
        });
      const rounds = new Set<Promise<void>>();
      let recording: Promise<void> | undefined;
      let failure: unknown;
      // Rung by an announcement, a POST done (a slot is free), a recorded pass or a failure.
      let announced = false;
      let ring: (() => void) | undefined;
      const rang = () => ring?.();
      const watch = queueNotices?.watch(endpointId, () => {
        announced = true;
        rang();
      });
      stopping?.addEventListener('abort', rang);
      // Watched from here (its announcements heard): the dispatcher need not wake the workflow.
      let [endpoint] = await Promise.all([
        loadEndpoint(endpointId),
        watch ? startWatching(db, endpointId, WATCH_LEASE_MS) : undefined,
      ]);
      /** When `endpoint` was read: a watch longer than the budget reads it again before claiming. */
      let endpointAtMs = Date.now();
      /** Deliveries just recorded: keeps watching `WATCH_IDLE_MS` more (within `WATCH_MAX_MS`) if it may. */
      const keepWatching = async () => {
        const untilMs = Math.min(started + WATCH_MAX_MS, Date.now() + WATCH_IDLE_MS);
        if (!watch || totals.failed > 0 || untilMs <= endsAtMs || !longWatchRoom()) return;
        endsAtMs = untilMs;
        if (longLease) return;
        longLease = true; // once: the watch is recorded to the longest it can last
        await startWatching(db, endpointId, started + LONG_WATCH_LEASE_MS - Date.now());
      };
      const track = (p: Promise<void>) => {
        const tracked = p.catch((err: unknown) => {
          failure ??= err;
          rang();
        });
        rounds.add(tracked);
        void tracked.finally(() => rounds.delete(tracked));
      };

      // A pass waits briefly for the POSTs still in flight to finish: one transaction records them
      // together (a pass per finished POST would make small transactions, most of the CPU).
      let gathered: (() => void) | undefined;
      const enoughMade = () => made.length >= RECORD_GATHER_ROWS || sending === 0;
      const gather = () =>
        enoughMade()
          ? Promise.resolve()
          : new Promise<void>((resolve) => {
              const timer = setTimeout(resolve, RECORD_GATHER_MS);
              gathered = () => {
                clearTimeout(timer);
                resolve();
              };
            }).finally(() => (gathered = undefined));

      /** Records what was made so far, in one transaction per pass, until nothing is left. */
      const record = async () => {
        while (made.length > 0 && failure === undefined) {
          await gather();
          const todo = made.splice(0);
          const { done, after, stale } = await db.transaction(async (trx) => {
            // The fence: only attempts whose rows this claim still holds are recorded (with the
            // failure clock they move); the others were taken back after their lease lapsed.
            const held = await stillClaimed(trx, endpointId, batch, todo);
            const mine = todo.filter((m) => held.has(attemptKey(m)));
            const recorded = await recordWithEndpoint(trx, endpointId, mine, input.nowMs);
            const done = mine.map((m) => ({ key: m as AttemptKey, result: recorded.results.get(attemptKey(m))! }));
            await advance(trx, endpointId, batch, done);
            return { done, after: recorded.endpoint, stale: todo.filter((m) => !held.has(attemptKey(m))) };
          });
          unrecorded -= todo.length;
          fencedWrites('webhook_queue', stale, 'recording');
          for (const { result } of done) {
            if (result.outcome !== 'delivered' && result.outcome !== 'failed') continue;
            totals.attempted++;
            totals[result.outcome]++;
          }
          if (done.some(({ result }) => result.outcome === 'delivered')) await keepWatching();
          // The endpoint as recording left it: a disable, a deletion or a new URL shows at once.
          endpoint = after;
          endpointAtMs = Date.now();
          rang();
        }
      };
      const recordSoon = () => {
        if (recording) return;
        recording = record().finally(() => (recording = undefined));
        track(recording);
      };

      /** Sends (or refuses) one claim's rows, then hands them to the recorder. */
      const send = async (
        current: EndpointRow,
        claimed: Array<ClaimedKey & { event: EventRow | undefined }>,
        atMs: number,
      ) => {
        // Resumed past this attempt's deadline (a pause): the batch's retry takes these rows back
        // and sends them; this one sends nothing more.
        if (deadline?.passed()) {
          sending -= claimed.length;
          unrecorded -= claimed.length;
          fencedWrites('webhook_queue', claimed, 'send');
          return;
        }
        const todo = claimed.flatMap((c) => (c.event ? [{ ...c, event: c.event }] : []));
        // A purged event's row leaves the queue: nothing to send or record.
        const purged = claimed.filter((c) => !c.event);
        const notDropped = await dropClaimed(db, endpointId, batch, purged);
        if (notDropped > 0) fencedWrites('webhook_queue', purged, 'drop purged');
        sending -= claimed.length - todo.length;
        unrecorded -= claimed.length - todo.length;
        // The address is checked once per URL for the whole activity, not once per claim.
        if (current.status === 'enabled' && checked?.url !== current.url)
          checked = { url: current.url, check: await checkWebhookUrl(current.url, webhooks) };
        /** An attempt goes to the recorder as it is made; a POST done frees its slot at once. */
        const leaseEnds = new Map(claimed.map((c) => [attemptKey(c), c.leaseEndMs]));
        const hand = (attempts: AttemptMade[]) => {
          sending -= attempts.length;
          made.push(...attempts.map((a) => ({ ...a, atMs, leaseEndMs: leaseEnds.get(attemptKey(a))! })));
          if (enoughMade()) gathered?.();
          recordSoon();
          rang();
        };
        const handed = new Set<AttemptMade>();
        const attempts = await attempt(current, todo, checked?.check, async (m) => {
          await webhooks.afterSend?.([m.eventId]);
          handed.add(m);
          hand([m]);
        });
        hand(attempts.filter((a) => !handed.has(a))); // refused: nothing was sent
      };

      delivering++;
      try {
        while (endpoint && failure === undefined && left() > 0 && !stopping?.aborted) {
          if (Date.now() - endpointAtMs > DELIVER_DUE_BUDGET_MS) {
            // Watching past the budget: a deletion, a disable or a new URL meanwhile shows here.
            endpoint = await loadEndpoint(endpointId);
            endpointAtMs = Date.now();
            continue;
          }
          const slots = Math.min(limit, endpoint.max_in_flight);
          // Claims are batched: with POSTs in flight, wait until half the slots are free (each
          // claim walks the queue's due index, which churns with every claim and delivery); and
          // no more than two slots' worth are held unrecorded (the recorder is behind).
          const room = Math.min(slots - sending, 2 * slots - unrecorded);
          const free = unrecorded === 0 || room >= Math.ceil(slots / 2) ? room : 0;
          if (free > 0) {
            announced = false;
            const atMs = at();
            // The first claim takes back what this batch still holds (a retry); later ones must not.
            const claimed = await withClaimedEvents(db, await claimDue(db, endpointId, batch, atMs, free, firstClaim));
            firstClaim = false;
            if (claimed.length > 0) {
              sending += claimed.length;
              unrecorded += claimed.length;
              track(send(endpoint, claimed, atMs));
              continue;
            }
            if (unrecorded === 0 && !watch) break; // nothing due, and no way to hear of more
          }
          // An announcement counts only with a slot free (announced stays set until a claim).
          if ((free > 0 && announced) || failure !== undefined) continue;
          await new Promise<void>((resolve) => {
            if (stopping?.aborted) return resolve(); // it may have rung while nothing waited
            const timer = setTimeout(resolve, Math.max(0, left()));
            ring = () => {
              clearTimeout(timer);
              resolve();
            };
          });
          ring = undefined;
        }
        if (stopping?.aborted && unrecorded > 0) {
          log.info('deliverDue stopped claiming: the worker is stopping; recording the POSTs in flight', {
            endpoint_id: endpointId,
            in_flight: unrecorded,
          });
        }
        while (rounds.size > 0) await Promise.all(rounds);
      } finally {
        delivering--;
        // Before the queue is read below: a row the dispatcher queued without a wake is seen there.
        if (watch) await stopWatching(db, endpointId).catch((err: unknown) => void (failure ??= err));
        watch?.close();
        stopping?.removeEventListener('abort', rang);
      }
      if (failure !== undefined) throw failure;
      if (!endpoint) {
        await cancelPending(endpointId, Infinity);
        return { ...totals, endpoint: 'deleted', failingSinceMs: null, nextDueAtMs: null, pending: 0, maxInFlight: 0 };
      }
      const state = await queueState(db, endpointId, COUNT_PENDING_UP_TO);
      return {
        ...totals,
        endpoint: endpoint.status,
        failingSinceMs: clockOf(endpoint),
        ...state,
        maxInFlight: endpoint.max_in_flight,
      };
    },

    /** Records up to 50,000 of a deleted endpoint's pending rows as `endpoint_deleted`; returns how many (0: none left). */
    async cancelPendingDeliveries(input: { endpointId: string }): Promise<number> {
      return cancelPending(input.endpointId, CANCEL_PER_CALL);
    },

    /** Queues events for the endpoint in Postgres (a `deliver` signal from the previous release); returns how many were new. */
    async queueDeliveries(input: { endpointId: string; eventIds: string[]; generation: number }): Promise<number> {
      const counts = await enqueue(
        db,
        input.eventIds.map((eventId) => ({ eventId, endpointId: input.endpointId })),
        input.generation,
      );
      return counts.get(input.endpointId) ?? 0;
    },

    /** Moves part of an old delivery workflow's queue into Postgres at its attempts and due times (idempotent). */
    async adoptPendingDeliveries(input: {
      endpointId: string;
      pending: Array<[string, number, number, number]>;
    }): Promise<number> {
      return adopt(
        db,
        input.endpointId,
        input.pending.map(([eventId, generation, attemptNo, dueAtMs]) => ({ eventId, generation, attemptNo, dueAtMs })),
      );
    },

    /**
     * One attempt of each delivery in the batch, made at `attemptAtMs` (workflow time, recorded as
     * delivered_at) and sent concurrently: skipped and recorded when the endpoint is gone
     * (`endpoint_deleted`) or disabled (`endpoint_disabled`), otherwise sent with a fresh timestamp
     * and recorded with its outcome. Results in the order given.
     */
    async deliverBatch(input: {
      endpointId: string;
      attemptAtMs: number;
      deliveries: AttemptKey[];
    }): Promise<AttemptResult[]> {
      const { endpointId, attemptAtMs, deliveries } = input;
      const deadline = activityDeadline();
      const [recorded, endpoint, events] = await Promise.all([
        recordedAttempts(db, endpointId, deliveries),
        db('webhook_endpoints').where({ id: endpointId }).first() as Promise<EndpointRow | undefined>,
        eventsByIds(
          db,
          deliveries.map((d) => d.eventId),
        ),
      ]);
      const open = deliveries.filter((d) => !recorded.has(attemptKey(d)));
      if (open.length > 0) {
        const byId = new Map(events.map((e) => [e.id, e]));
        const todo = open.flatMap((d) => {
          const event = byId.get(d.eventId);
          return event ? [{ ...d, event }] : []; // a purged event is dropped, nothing recorded
        });
        const made = await attempt(endpoint, todo);
        if (made.length === 0) return deliveries.map((d) => recorded.get(attemptKey(d)) ?? droppedResult);
        // Recorded only within this attempt's deadline: past it, the retry sends and records them.
        const fresh = await fencedByDeadline('activity', { activity: 'deliverBatch', endpoint_id: endpointId }, () =>
          db.transaction(async (trx) => {
            const { results } = await recordWithEndpoint(trx, endpointId, made, attemptAtMs);
            assertBeforeDeadline(deadline);
            return results;
          }),
        );
        for (const [key, result] of fresh) recorded.set(key, result);
      }
      return deliveries.map((d) => recorded.get(attemptKey(d)) ?? droppedResult);
    },

    /** Records scheduled attempts that will not happen (the endpoint was deleted). */
    async recordCancelledDeliveries(input: {
      endpointId: string;
      error: 'endpoint_deleted';
      deliveries: AttemptKey[];
    }): Promise<number> {
      return recordCancelled(db, input.endpointId, input.error, input.deliveries);
    },

    /** The 24-hour e-mail to the merchant's contact, decided by Postgres as of `nowMs` (workflow time); once per failure streak. */
    async notifyFailingEndpoint(input: { endpointId: string; nowMs: number }): Promise<{ notified: boolean }> {
      const deadline = activityDeadline();
      return fencedByDeadline('endpoint_failure_clock', { activity: 'notify', endpoint_id: input.endpointId }, () =>
        notifyIfFailing(db, input.endpointId, input.nowMs, () => assertBeforeDeadline(deadline)),
      );
    },

    /** The 3-day disable, decided by Postgres as of `nowMs` (workflow time); the e-mail goes with it. */
    async disableFailingEndpoint(input: {
      endpointId: string;
      nowMs: number;
    }): Promise<{ disabled: boolean; failingSinceMs: number | null }> {
      const deadline = activityDeadline();
      return fencedByDeadline('endpoint_failure_clock', { activity: 'disable', endpoint_id: input.endpointId }, () =>
        disableIfStillFailing(db, input.endpointId, input.nowMs, () => assertBeforeDeadline(deadline)),
      );
    },
  };
}

export type DeliveryActivities = ReturnType<typeof createDeliveryActivities>;
