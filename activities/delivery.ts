import { eventOut, EventRow } from '../src/checkout/events';
import type { Db } from '../src/db/knex';
import type { Clock } from '../src/lib/clock';
import {
  AttemptKey,
  AttemptResult,
  disableIfStillFailing,
  recordAttempt,
  recordCancelled,
  recordedAttempt,
} from '../src/webhooks/attempts';
import type { EndpointRow } from '../src/webhooks/endpoint-row';
import type { WebhookRuntime } from '../src/webhooks/runtime';
import { DELIVERY_TIMEOUT_MS } from '../src/webhooks/schedule';
import { deliveryAgent, postWebhook, SendResult } from '../src/webhooks/send';
import { signatureHeader } from '../src/webhooks/signing';
import { checkWebhookUrl } from '../src/webhooks/url-safety';

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

  /** Checks the target again (DNS may have changed), then signs and POSTs the event to the checked address. */
  async function send(endpoint: EndpointRow, event: EventRow): Promise<SendResult> {
    const check = await checkWebhookUrl(endpoint.url, webhooks);
    if (!check.ok) return { statusCode: null, error: check.issue };
    const body = JSON.stringify(eventOut(event));
    const headers = {
      'content-type': 'application/json',
      'svc-signature': signatureHeader(body, signingSecrets(endpoint), Math.floor(clock().getTime() / 1000)),
      'svc-event-id': event.id,
      'svc-event-type': event.type,
    };
    return postWebhook(check.target, body, headers, { agent, timeoutMs: DELIVERY_TIMEOUT_MS });
  }

  return {
    /**
     * One attempt of one delivery, made at `attemptAtMs` (workflow time, recorded as delivered_at):
     * skipped and recorded when the endpoint is gone (`endpoint_deleted`) or disabled
     * (`endpoint_disabled`), otherwise sent with a fresh timestamp and recorded with its outcome.
     */
    async deliverAttempt(input: AttemptKey & { attemptAtMs: number }): Promise<AttemptResult> {
      const recorded = await recordedAttempt(db, input);
      if (recorded) return recorded;
      const event: EventRow | undefined = await db('events').where({ id: input.eventId }).first();
      if (!event) {
        return { outcome: 'dropped', statusCode: null, error: null, nextRetryAtMs: null, failingSinceMs: null };
      }
      const endpoint: EndpointRow | undefined = await db('webhook_endpoints').where({ id: input.endpointId }).first();
      const record = (result: SendResult, attempted: boolean) =>
        recordAttempt(db, input, event, { ...result, attemptAtMs: input.attemptAtMs, attempted });
      if (!endpoint || endpoint.merchant_id !== event.merchant_id || endpoint.mode !== event.mode) {
        return record({ statusCode: null, error: 'endpoint_deleted' }, false);
      }
      if (endpoint.status !== 'enabled') return record({ statusCode: null, error: 'endpoint_disabled' }, false);
      return record(await send(endpoint, event), true);
    },

    /** Records scheduled attempts that will not happen (the endpoint was deleted). */
    async recordCancelledDeliveries(input: {
      endpointId: string;
      error: 'endpoint_deleted';
      deliveries: Array<{ eventId: string; generation: number; attemptNo: number }>;
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
