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

let lastMs = -1;
let lastRandom: number[] = [];

/** The previous random part plus one, in base 32 (an overflow carries into a fresh random part). */
function increment(digits: number[]): number[] | null {
  const next = [...digits];
  for (let i = next.length - 1; i >= 0; i--) {
    if (next[i] < 31) {
      next[i] += 1;
      return next;
    }
    next[i] = 0;
  }
  return null;
}

/**
 * A time-ordered id body: 10 characters of millisecond time then 16 random ones, all in
 * lower-case Crockford base32 (ULID layout). Within one process ids are strictly increasing:
 * in the same millisecond the random part counts up, so creation order is sort order.
 */
export function timeOrderedBody(now = Date.now()): string {
  const ms = Math.max(now, lastMs);
  const bumped = ms === lastMs ? increment(lastRandom) : null;
  lastRandom = bumped ?? Array.from(randomString(16, CROCKFORD), (c) => CROCKFORD.indexOf(c));
  lastMs = ms;
  let time = '';
  let t = ms;
  for (let i = 0; i < 10; i++) {
    time = CROCKFORD[t % 32] + time;
    t = Math.floor(t / 32);
  }
  return time + lastRandom.map((d) => CROCKFORD[d]).join('');
}

export type Mode = 'live' | 'test';

/** A new prefixed id: `newId('sel')` → `sel_…`; with a mode, `newId('cs', 'test')` → `cs_test_…`. */
export function newId(prefix: string, mode?: Mode): string {
  return mode ? `${prefix}_${mode}_${timeOrderedBody()}` : `${prefix}_${timeOrderedBody()}`;
}
