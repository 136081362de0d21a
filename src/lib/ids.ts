import { randomBytes } from 'node:crypto';
import { CROCKFORD, base32 } from './id-time';

const ALPHANUM = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

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

/** Ids one process can make in one millisecond before its clock part moves on to the next. */
const SEQUENCE_DIGITS = 2;
const SEQUENCE_SIZE = 32 ** SEQUENCE_DIGITS;
/** 16 base32 characters: 80 random bits in every id. */
const RANDOM_DIGITS = 16;

let lastMs = -1;
let sequence = 0;

/**
 * A time-ordered id body of 28 lower-case Crockford base32 characters: 10 of millisecond time, 2
 * of a per-process sequence within that millisecond, then 16 fresh random ones (80 bits). The
 * prefix keeps creation order as sort order within a process (1,024 ids a millisecond; more
 * borrow the next millisecond); the random part is new for every id, so no id can be guessed from
 * another one, however close in time.
 */
export function timeOrderedBody(now = Date.now()): string {
  let ms = Math.max(now, lastMs);
  if (ms === lastMs) sequence += 1;
  else sequence = 0;
  if (sequence === SEQUENCE_SIZE) {
    ms += 1;
    sequence = 0;
  }
  lastMs = ms;
  return base32(ms, 10) + base32(sequence, SEQUENCE_DIGITS) + randomString(RANDOM_DIGITS, CROCKFORD);
}

/** The millisecond time in an id made by newId (its body's first 10 characters), or null for another string. */
export function idTime(id: string): number | null {
  const body = id.slice(-28);
  if (id.length < 29 || !/^[0-9a-hjkmnp-tv-z]{28}$/.test(body)) return null;
  let ms = 0;
  for (const c of body.slice(0, 10)) ms = ms * 32 + CROCKFORD.indexOf(c);
  return ms;
}

export type Mode = 'live' | 'test';

/** A new prefixed id: `newId('sel')` → `sel_…`; with a mode, `newId('cs', 'test')` → `cs_test_…`. */
export function newId(prefix: string, mode?: Mode): string {
  return mode ? `${prefix}_${mode}_${timeOrderedBody()}` : `${prefix}_${timeOrderedBody()}`;
}
