/**
 * Webhook verification for a merchant's Node server: copy this file as it is (it needs only
 * `node:crypto`). Verify the raw request bytes before parsing them:
 *
 *   app.post('/webhooks', express.raw({ type: 'application/json' }), (req, res) => {
 *     let event;
 *     try {
 *       event = verify(req.body, req.get('Svc-Signature'), [process.env.SVC_WEBHOOK_SECRET!]);
 *     } catch (err) {
 *       return res.status(400).send(String(err));
 *     }
 *     // De-duplicate on event.id, then read the session before acting on it.
 *     res.sendStatus(204);
 *   });
 *
 * The header is `t=<unix seconds>,v1=<hex>[,v1=<hex>]`: each v1 is HMAC-SHA256 of `<t>.<raw body>`
 * keyed with a signing secret (two during a secret rotation; any one matching is valid).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** Why a webhook was refused; the message names the likely mistake. */
export class WebhookVerificationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WebhookVerificationError';
  }
}

/** The event a verified webhook carries (new fields and types may appear; ignore unknown ones). */
export interface WebhookEvent {
  id: string;
  object: 'event';
  type: string;
  livemode: boolean;
  created_at: string;
  data: { object: Record<string, unknown> };
}

const HEX_SIGNATURE = /^[0-9a-f]{64}$/;

function parseHeader(header: string): { timestamp: number; signatures: string[] } {
  let timestamp: number | undefined;
  const signatures: string[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    const key = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (key === 't' && /^[0-9]{1,12}$/.test(value)) timestamp = Number(value);
    else if (key === 'v1' && HEX_SIGNATURE.test(value)) signatures.push(value);
  }
  if (timestamp === undefined || signatures.length === 0) {
    throw new WebhookVerificationError(
      'The Svc-Signature header is malformed: expected t=<unix seconds>,v1=<64 hex digits>. ' +
        'Pass the Svc-Signature header itself, not another header.',
    );
  }
  return { timestamp, signatures };
}

function hmacHex(secret: string, timestamp: number, body: Buffer): string {
  return createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest('hex');
}

/** Compares two hex strings in time independent of their content (their lengths are public). */
function sameHex(a: string, b: string): boolean {
  const ab = Buffer.from(a, 'utf8');
  const bb = Buffer.from(b, 'utf8');
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}

/**
 * Checks a webhook's `Svc-Signature` against the raw body and your endpoint's secrets (pass both
 * during a rotation), refuses a timestamp more than `toleranceSeconds` from `now()`, and returns
 * the parsed event. Throws WebhookVerificationError otherwise.
 */
export function verify(
  rawBody: string | Buffer | Uint8Array,
  header: string | string[] | null | undefined,
  secrets: string | readonly string[],
  toleranceSeconds = 300,
  now: () => number = Date.now,
): WebhookEvent {
  if (typeof rawBody !== 'string' && !(rawBody instanceof Uint8Array)) {
    throw new WebhookVerificationError(
      'The body must be the raw request bytes (a string or Buffer), but it is an already parsed object: ' +
        'read the body raw (for example express.raw({ type: "application/json" })) and verify before parsing.',
    );
  }
  if (Array.isArray(header)) {
    throw new WebhookVerificationError('More than one Svc-Signature header was received; expected exactly one.');
  }
  if (typeof header !== 'string' || header === '') {
    throw new WebhookVerificationError('No Svc-Signature header: this request was not sent by the webhook service.');
  }
  const keys = (typeof secrets === 'string' ? [secrets] : [...secrets]).filter((s) => s !== '');
  if (keys.length === 0) {
    throw new WebhookVerificationError("No signing secret given: pass the endpoint's whsec_… secret.");
  }
  const { timestamp, signatures } = parseHeader(header);
  const body = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : Buffer.from(rawBody);

  const expected = keys.map((secret) => hmacHex(secret, timestamp, body));
  let matched = false;
  for (const candidate of expected) {
    for (const signature of signatures) matched = sameHex(candidate, signature) || matched;
  }
  if (!matched) {
    const hint = keys.some((k) => !k.startsWith('whsec_'))
      ? " A secret does not start with whsec_: pass the endpoint's signing secret, not an API key."
      : '';
    throw new WebhookVerificationError(
      'No signature matches the body. Check that you verify the raw request bytes (a body that was parsed ' +
        "and re-serialised no longer matches) and the endpoint's current secret (both during a rotation)." +
        hint,
    );
  }
  const skewSeconds = Math.abs(Math.floor(now() / 1000) - timestamp);
  if (skewSeconds > toleranceSeconds) {
    throw new WebhookVerificationError(
      `The signature timestamp is ${skewSeconds} s away from this server's clock (tolerance ${toleranceSeconds} s): ` +
        'a replayed request, or a server clock that is wrong.',
    );
  }
  try {
    return JSON.parse(body.toString('utf8')) as WebhookEvent;
  } catch {
    throw new WebhookVerificationError('The signature matches but the body is not JSON.');
  }
}

/** A valid `Svc-Signature` for `rawBody`, for your own tests of a receiver. */
export function signTestHeader(
  rawBody: string | Buffer,
  secret: string,
  timestampSeconds = Math.floor(Date.now() / 1000),
): string {
  const body = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody;
  return `t=${timestampSeconds},v1=${hmacHex(secret, timestampSeconds, body)}`;
}
