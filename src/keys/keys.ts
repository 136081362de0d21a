import { constantTimeEqual, sha256Hex } from '../lib/hash';
import { randomString } from '../lib/ids';

/** Key kinds: Partner secret key, Checkout secret key, Checkout publishable key. */
export type KeyKind = 'sk' | 'ck' | 'pk';
export type KeyMode = 'test' | 'live';

const KEY_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-';
export const KEY_ID_LENGTH = 12;
export const KEY_SECRET_LENGTH = 32;

// Both segments may contain `_` and `-`; their fixed lengths make the split unambiguous.
const KEY_PATTERN = new RegExp(
  `^svc_(sk|ck|pk)_(test|live)_([A-Za-z0-9_-]{${KEY_ID_LENGTH}})_([A-Za-z0-9_-]{${KEY_SECRET_LENGTH}})$`,
);

export interface ParsedKey {
  kind: KeyKind;
  mode: KeyMode;
  keyId: string;
  secret: string;
}

/** Parses a full key; null when it is not a well-formed key of any kind. */
export function parseKey(key: string): ParsedKey | null {
  const m = KEY_PATTERN.exec(key);
  if (!m) return null;
  return { kind: m[1] as KeyKind, mode: m[2] as KeyMode, keyId: m[3], secret: m[4] };
}

/** The bearer credential of an `Authorization` header: exactly `Bearer` and one space, else null. */
export function bearer(header: string | undefined): string | null {
  if (!header || !header.startsWith('Bearer ')) return null;
  const token = header.slice('Bearer '.length);
  return token.length > 0 && !/\s/.test(token) ? token : null;
}

export interface NewKey {
  key: string;
  keyId: string;
  secretHash: string;
}

/** Makes a new key; only `secretHash` is ever stored. `parts` fixes the id and secret (tests). */
export function generateKey(kind: KeyKind, mode: KeyMode, parts: { keyId?: string; secret?: string } = {}): NewKey {
  const keyId = parts.keyId ?? randomString(KEY_ID_LENGTH, KEY_ALPHABET);
  const secret = parts.secret ?? randomString(KEY_SECRET_LENGTH, KEY_ALPHABET);
  const key = `svc_${kind}_${mode}_${keyId}_${secret}`;
  if (!parseKey(key)) throw new Error('key id or secret has the wrong length or alphabet');
  return { key, keyId, secretHash: hashSecret(secret) };
}

export function hashSecret(secret: string): string {
  return sha256Hex(secret);
}

/** True when `secret` hashes to `storedHash`, compared in constant time. */
export function secretMatches(secret: string, storedHash: string): boolean {
  return constantTimeEqual(hashSecret(secret), storedHash);
}
