import { randomBytes } from 'node:crypto';
import { parseSecretKey, secretCipher } from '../../src/webhooks/secret-crypto';
import { newSigningSecret } from '../../src/webhooks/sign';

/** Signing secrets: their format, and their encryption at rest. */
it('makes whsec_ secrets with 32 random base62 characters', () => {
  const a = newSigningSecret();
  expect(a).toMatch(/^whsec_[0-9A-Za-z]{32}$/);
  expect(newSigningSecret()).not.toBe(a);
});

it('encrypts a secret so that only the same key and endpoint id decrypt it', () => {
  const key = randomBytes(32);
  const cipher = secretCipher(key);
  const secret = newSigningSecret();
  const sealed = cipher.encrypt(secret, 'we_1');
  expect(sealed).not.toContain(secret.slice(6));
  expect(cipher.encrypt(secret, 'we_1')).not.toBe(sealed); // a fresh IV every time
  expect(cipher.decrypt(sealed, 'we_1')).toBe(secret);
  expect(() => cipher.decrypt(sealed, 'we_2')).toThrow();
  expect(() => secretCipher(randomBytes(32)).decrypt(sealed, 'we_1')).toThrow();
});

it('reads a 32-byte key as hex or base64 and refuses anything else', () => {
  const key = randomBytes(32);
  expect(parseSecretKey(key.toString('hex'))).toEqual(key);
  expect(parseSecretKey(key.toString('base64'))).toEqual(key);
  expect(parseSecretKey(key.toString('base64url'))).toEqual(key);
  expect(parseSecretKey('short')).toBeNull();
  expect(parseSecretKey(randomBytes(16).toString('hex'))).toBeNull();
});
