/** Secrets at rest: AES-256-GCM encryption of signing secrets, bound to their endpoint id. */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/** Encrypts signing secrets at rest (AES-256-GCM); the endpoint id is bound in as associated data. */
export interface SecretCipher {
  encrypt(secret: string, endpointId: string): string;
  decrypt(ciphertext: string, endpointId: string): string;
}

const VERSION = 'v1';

/**
 * The 32-byte key from WEBHOOK_SECRET_KEY: 64 hex digits or base64 (standard or url-safe) of 32
 * bytes; null when the value is neither.
 */
export function parseSecretKey(value: string): Buffer | null {
  if (/^[0-9a-fA-F]{64}$/.test(value)) return Buffer.from(value, 'hex');
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(value)) {
    const key = Buffer.from(value.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
    return key.length === 32 ? key : null;
  }
  return null;
}

/** A cipher over `key` (32 bytes). Ciphertexts read `v1.<iv>.<tag>.<data>` in base64url. */
export function secretCipher(key: Buffer): SecretCipher {
  if (key.length !== 32) throw new Error('the webhook secret key must be 32 bytes');
  return {
    encrypt(secret, endpointId) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(Buffer.from(endpointId, 'utf8'));
      const data = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
      return [VERSION, iv, cipher.getAuthTag(), data]
        .map((p) => (typeof p === 'string' ? p : p.toString('base64url')))
        .join('.');
    },
    decrypt(ciphertext, endpointId) {
      const [version, iv, tag, data] = ciphertext.split('.');
      if (version !== VERSION || data === undefined) throw new Error('not a webhook secret ciphertext');
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
      decipher.setAAD(Buffer.from(endpointId, 'utf8'));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(data, 'base64url')), decipher.final()]).toString('utf8');
    },
  };
}
