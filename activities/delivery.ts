import { eventOut, EventRow } from '../src/checkout/events';
import type { Db } from '../src/db/knex';
import type { Clock } from '../src/lib/clock';
import {
  AttemptKey,
  attemptKey,
  AttemptMade,
  AttemptResult,
  disableIfStillFailing,
  droppedResult,
  recordAttempts,
  recordCancelled,
  recordedAttempts,
} from '../src/webhooks/attempts';
import type { EndpointRow } from '../src/webhooks/endpoint-row';
import { adopt, advance, claimDue, enqueue, queueState, takePending } from '../src/webhooks/queue';
import type { WebhookRuntime } from '../src/webhooks/runtime';
import { DELIVERY_TIMEOUT_MS } from '../src/webhooks/schedule';
import { deliveryAgent, postWebhook, SendResult } from '../src/webhooks/send';
import { signatureHeader } from '../src/webhooks/signing';
import { checkWebhookUrl, CheckedTarget } from '../src/webhooks/url-safety';
import type { QueueNotices } from '../src/webhooks/queue-notices';

/** How long one `deliverDue` keeps taking newly due rows before it reports back to its workflow. */
const DELIVER_DUE_BUDGET_MS = 2000;
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
}

/** Webhook delivery activities: each records what it did, so a retry returns the recorded result. */
export function createDeliveryActivities({ db, clock, webhooks, queueNotices }: DeliveryActivityDeps) {
  const agent = deliveryAgent(webhooks.extraCa);

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
  function send(target: CheckedTarget, secrets: string[], event: EventRow): Promise<SendResult> {
    const body = JSON.stringify(eventOut(event));
    const headers = {
      'content-type': 'application/json',
      'svc-signature': signatureHeader(body, secrets, Math.floor(clock().getTime() / 1000)),
      'svc-event-id': event.id,
      'svc-event-type': event.type,
    };
    return postWebhook(target, body, headers, { agent, timeoutMs: DELIVERY_TIMEOUT_MS });
  }

  /** What each attempt comes to: refused before sending, or sent (the target checked once for the batch). */
  async function attempt(
    endpoint: EndpointRow | undefined,
    todo: Array<AttemptKey & { event: EventRow }>,
  ): Promise<AttemptMade[]> {
    const refuse = (error: string) => todo.map((a) => ({ ...a, statusCode: null, error, attempted: false }));
    if (!endpoint) return refuse('endpoint_deleted');
    if (endpoint.status !== 'enabled') return refuse('endpoint_disabled');
    const check = await checkWebhookUrl(endpoint.url, webhooks); // DNS may have changed since registration
    if (!check.ok) return todo.map((a) => ({ ...a, statusCode: null, error: check.issue, attempted: true }));
    const secrets = signingSecrets(endpoint);
    return Promise.all(
      todo.map(async (a) => ({ ...a, ...(await send(check.target, secrets, a.event)), attempted: true })),
    );
  }

  const loadEndpoint = (endpointId: string) =>
    db('webhook_endpoints').where({ id: endpointId }).first() as Promise<EndpointRow | undefined>;
  const clockOf = (endpoint: EndpointRow) =>
    endpoint.status === 'enabled' && endpoint.failing_since ? new Date(endpoint.failing_since).getTime() : null;

  /** Records every pending row of a deleted endpoint as `endpoint_deleted`, up to `max`; returns how many. */
  async function cancelPending(endpointId: string, max: number): Promise<number> {
    let total = 0;
    while (total < max) {
      const n = await db.transaction(async (trx) => {
        const keys = await takePending(trx, endpointId, CANCEL_CHUNK);
        await recordCancelled(trx, endpointId, 'endpoint_deleted', keys);
        return keys.length;
      });
      total += n;
      if (n < CANCEL_CHUNK) break;
    }
    return total;
  }

  return {
    /**
     * The endpoint's due deliveries from the Postgres queue: claims up to `limit` due rows for
     * `batch` as of `nowMs` (workflow time, moved on by the time spent here), sends them at once,
     * records each attempt and moves its row on in one transaction, and goes round again while
     * rows are due, for about 2 seconds; with nothing due it waits, within those seconds, for the
     * dispatcher to announce rows for the endpoint and takes them at once. A retry of the same batch sends the rows it still holds
     * again (same event id, same attempt) before anything else. When the endpoint is gone, records
     * every pending row as `endpoint_deleted`.
     */
    async deliverDue(input: { endpointId: string; batch: string; nowMs: number; limit: number }): Promise<DueResult> {
      const { endpointId, batch, limit } = input;
      const started = Date.now();
      // Workflow time (ahead of the wall clock where tests skip time), never behind the wall clock:
      // rows the dispatcher queues are due at their commit.
      const at = () => Math.max(input.nowMs + (Date.now() - started), Date.now());
      const watch = queueNotices?.watch(input.endpointId);
      const totals = { attempted: 0, delivered: 0, failed: 0 };
      let endpoint = await loadEndpoint(endpointId);
      let checked: { url: string; check: Awaited<ReturnType<typeof checkWebhookUrl>> } | undefined;
      try {
        while (endpoint && Date.now() - started < DELIVER_DUE_BUDGET_MS) {
          const attemptAtMs = at();
          // The setting may have been lowered since the workflow last heard of it.
          const keys = await claimDue(db, endpointId, batch, attemptAtMs, Math.min(limit, endpoint.max_in_flight));
          if (keys.length === 0) {
            if (await watch?.announced(DELIVER_DUE_BUDGET_MS - (Date.now() - started))) continue;
            break;
          }
          const events: EventRow[] = await db('events').whereIn('id', [...new Set(keys.map((k) => k.eventId))]);
          const byId = new Map(events.map((e) => [e.id, e]));
          const todo = keys.flatMap((k) => {
            const event = byId.get(k.eventId);
            return event ? [{ ...k, event }] : []; // purged since: its row went with it
          });
          const current = endpoint;
          const sameTenant = (e: EventRow) => e.merchant_id === current.merchant_id && e.mode === current.mode;
          let made: AttemptMade[];
          if (current.status !== 'enabled') made = await attempt(current, todo);
          else {
            if (checked?.url !== current.url)
              checked = { url: current.url, check: await checkWebhookUrl(current.url, webhooks) };
            const check = checked.check;
            const secrets = signingSecrets(current);
            const mine = todo.filter((a) => sameTenant(a.event));
            made = [
              ...(await Promise.all(
                mine.map(async (a) =>
                  check.ok
                    ? { ...a, ...(await send(check.target, secrets, a.event)), attempted: true }
                    : { ...a, statusCode: null, error: check.issue, attempted: true },
                ),
              )),
              // Never send another tenant's event (a dispatcher bug): treat the endpoint as gone for it.
              ...(await attempt(
                undefined,
                todo.filter((a) => !sameTenant(a.event)),
              )),
            ];
          }
          await webhooks.afterSend?.(made.map((m) => m.eventId));
          const results = await db.transaction(async (trx) => {
            const recorded = await recordAttempts(trx, endpointId, made, attemptAtMs);
            const done = made.map((m) => ({ key: m as AttemptKey, result: recorded.get(attemptKey(m))! }));
            await advance(trx, endpointId, batch, done);
            return done;
          });
          for (const { result } of results) {
            if (result.outcome !== 'delivered' && result.outcome !== 'failed') continue;
            totals.attempted++;
            totals[result.outcome]++;
          }
          endpoint = await loadEndpoint(endpointId);
        }
      } finally {
        watch?.close();
      }
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
      const [recorded, endpoint, events] = await Promise.all([
        recordedAttempts(db, endpointId, deliveries),
        db('webhook_endpoints').where({ id: endpointId }).first() as Promise<EndpointRow | undefined>,
        db('events').whereIn('id', [...new Set(deliveries.map((d) => d.eventId))]) as Promise<EventRow[]>,
      ]);
      const open = deliveries.filter((d) => !recorded.has(attemptKey(d)));
      if (open.length > 0) {
        const byId = new Map(events.map((e) => [e.id, e]));
        const todo = open.flatMap((d) => {
          const event = byId.get(d.eventId);
          return event ? [{ ...d, event }] : []; // a purged event is dropped, nothing recorded
        });
        // Never send another tenant's event (a dispatcher bug): treat the endpoint as gone for it.
        const sameTenant = (e: EventRow) =>
          endpoint !== undefined && e.merchant_id === endpoint.merchant_id && e.mode === endpoint.mode;
        const made = [
          ...(await attempt(
            endpoint,
            todo.filter((a) => sameTenant(a.event)),
          )),
          ...(await attempt(
            undefined,
            todo.filter((a) => !sameTenant(a.event)),
          )),
        ];
        const fresh = await recordAttempts(db, endpointId, made, attemptAtMs);
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

    /** The 3-day disable, decided by Postgres as of `nowMs` (workflow time); the e-mail goes with it. */
    async disableFailingEndpoint(input: {
      endpointId: string;
      nowMs: number;
    }): Promise<{ disabled: boolean; failingSinceMs: number | null }> {
      return disableIfStillFailing(db, input.endpointId, input.nowMs);
    },
  };
}

export type DeliveryActivities = ReturnType<typeof createDeliveryActivities>;
