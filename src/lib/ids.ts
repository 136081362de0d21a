import { randomBytes } from 'node:crypto';

const ALPHANUM = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';

/** A random string of `length` characters from `alphabet`, without modulo bias. */
export function randomString(length: number, alphabet = ALPHANUM): string {
  let out = '';
  while (out.length < length) {
    for (const b of randomBytes(length * 2)) {
      const limit = 256 - (256 % alphabet.length);
      if (b < limit) out += alphabet[b % alphabet.length];
      if (out.length === length) break;
    }
  }
  return out;
}

/**
 * A time-ordered id body: 10 characters of millisecond time then 16 random ones,
 * all in lower-case Crockford base32, so ids sort by creation time (ULID layout).
 */
export function timeOrderedBody(now = Date.now()): string {
  let time = '';
  let t = now;
  for (let i = 0; i < 10; i++) {
    time = CROCKFORD[t % 32] + time;
    t = Math.floor(t / 32);
  }
  return time + randomString(16, CROCKFORD);
}

export type Mode = 'live' | 'test';

/** A new prefixed id: `newId('sel')` → `sel_…`; with a mode, `newId('cs', 'test')` → `cs_test_…`. */
export function newId(prefix: string, mode?: Mode): string {
  return mode ? `${prefix}_${mode}_${timeOrderedBody()}` : `${prefix}_${timeOrderedBody()}`;
}
