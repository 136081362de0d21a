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
import type { WebhookRuntime } from '../src/webhooks/runtime';
import { DELIVERY_TIMEOUT_MS } from '../src/webhooks/schedule';
import { deliveryAgent, postWebhook, SendResult } from '../src/webhooks/send';
import { signatureHeader } from '../src/webhooks/signing';
import { checkWebhookUrl, CheckedTarget } from '../src/webhooks/url-safety';

export interface DeliveryActivityDeps {
  db: Db;
  /** The wall clock: signature timestamps and the rotation overlap (set by the API on the same clock). */
  clock: Clock;
  webhooks: WebhookRuntime;
}

/** Webhook delivery activities: each records what it did, so a retry returns the recorded result. */
export function createDeliveryActivities({ db, clock, webhooks }: DeliveryActivityDeps) {
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

  return {
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
