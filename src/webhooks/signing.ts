import { createHmac, randomBytes } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** A new signing secret: `whsec_` and 32 base62 characters (about 190 bits); the whole string is the HMAC key. */
export function newSigningSecret(): string {
  let body = '';
  while (body.length < 32) {
    for (const b of randomBytes(48)) {
      if (b < 248 && body.length < 32) body += BASE62[b % 62];
    }
  }
  return `whsec_${body}`;
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
