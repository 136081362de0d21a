/** Sign: signing secrets, and the headers of both schemes (`Svc-Signature`, Stripe's; `webhook-*`, Standard Webhooks). */
import { createHmac, randomBytes } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const SECRET_PREFIX = 'whsec_';

/**
 * A new signing secret: `whsec_` and 32 base62 characters (about 190 bits). It serves both schemes:
 * `Svc-Signature` (Stripe's) keys the HMAC with the whole string, and Standard Webhooks with the
 * base64 decoding of what follows `whsec_` (base62 characters are base64 characters, and 32 of
 * them decode to exactly 24 bytes, the scheme's minimum key size).
 */
export function newSigningSecret(): string {
  let body = '';
  while (body.length < 32) {
    for (const b of randomBytes(48)) {
      if (b < 248 && body.length < 32) body += BASE62[b % 62];
    }
  }
  return `${SECRET_PREFIX}${body}`;
}

/**
 * The `Svc-Signature` header for one attempt: `t=<unix seconds>` then one `v1=<hex>` per secret
 * (the current one first, then the previous one during a rotation), each HMAC-SHA256 of `<t>.<body>`.
 */
export function signatureHeader(body: string, secrets: readonly string[], timestampSeconds: number): string {
  const v1 = secrets.map(
    (secret) => `v1=${createHmac('sha256', secret).update(`${timestampSeconds}.${body}`).digest('hex')}`,
  );
  return [`t=${timestampSeconds}`, ...v1].join(',');
}

/** The Standard Webhooks key of a `whsec_` secret: the base64 decoding of what follows the prefix. */
function standardKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
}

/**
 * The Standard Webhooks `webhook-signature` header: one `v1,<base64>` per secret, space-separated
 * (current first), each HMAC-SHA256 of `<id>.<timestamp>.<body>` keyed with the decoded secret.
 */
export function standardSignatureHeader(
  messageId: string,
  body: string,
  secrets: readonly string[],
  timestampSeconds: number,
): string {
  return secrets
    .map(
      (secret) =>
        `v1,${createHmac('sha256', standardKey(secret)).update(`${messageId}.${timestampSeconds}.${body}`).digest('base64')}`,
    )
    .join(' ');
}

/**
 * Every header that signs and names one webhook request: ours (`Svc-Signature`, `Svc-Event-Id`,
 * `Svc-Event-Type`) and Standard Webhooks' (`webhook-id` = the event id, `webhook-timestamp`,
 * `webhook-signature`), both schemes over the same timestamp and secrets.
 */
export function webhookHeaders(
  event: { id: string; type: string },
  body: string,
  secrets: readonly string[],
  timestampSeconds: number,
): Record<string, string> {
  return {
    'content-type': 'application/json',
    'svc-signature': signatureHeader(body, secrets, timestampSeconds),
    'svc-event-id': event.id,
    'svc-event-type': event.type,
    'webhook-id': event.id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': standardSignatureHeader(event.id, body, secrets, timestampSeconds),
  };
}
