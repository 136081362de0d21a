import { createHash, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import type { AuthenticationResponseJSON, RegistrationResponseJSON } from '@simplewebauthn/server';
import { isoCBOR } from '@simplewebauthn/server/helpers';

const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest();
const b64u = (data: Buffer | Uint8Array) => Buffer.from(data).toString('base64url');

/**
 * A WebAuthn authenticator in the test's process (one ES256 credential, attestation "none"), to
 * drive the console's passkey routes over HTTP the way a browser would, including answers a
 * browser never gives (another challenge, another origin, an old counter). The browser test uses
 * Chromium's virtual authenticator instead.
 */
export class SoftwareAuthenticator {
  readonly rawId = randomBytes(16);
  private readonly keys = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  /** The signature counter the next assertion carries (one more than now). */
  counter = 0;
  /** Whether its answers say the user was verified (a PIN or biometric), as a platform authenticator's do. */
  userVerified = true;

  constructor(readonly origin: string) {}

  get id(): string {
    return b64u(this.rawId);
  }

  private authData(attested: boolean): Buffer {
    const counter = Buffer.alloc(4);
    counter.writeUInt32BE(this.counter);
    // User present, user verified (unless not), and attested credential data when registering.
    const flags = Buffer.from([0x01 | (this.userVerified ? 0x04 : 0) | (attested ? 0x40 : 0)]);
    const parts = [sha256(new URL(this.origin).hostname), flags, counter];
    if (attested) {
      const jwk = this.keys.publicKey.export({ format: 'jwk' });
      const coseKey = isoCBOR.encode(
        new Map<number, number | Uint8Array>([
          [1, 2],
          [3, -7],
          [-1, 1],
          [-2, Buffer.from(jwk.x!, 'base64url')],
          [-3, Buffer.from(jwk.y!, 'base64url')],
        ]),
      );
      const length = Buffer.alloc(2);
      length.writeUInt16BE(this.rawId.length);
      parts.push(Buffer.alloc(16), length, this.rawId, Buffer.from(coseKey));
    }
    return Buffer.concat(parts);
  }

  private clientData(type: 'webauthn.create' | 'webauthn.get', challenge: string, origin: string): Buffer {
    return Buffer.from(JSON.stringify({ type, challenge, origin, crossOrigin: false }));
  }

  /** The answer to registration options with `challenge` (from `origin`, by default the console's). */
  register(challenge: string, origin = this.origin): RegistrationResponseJSON {
    const attestationObject = isoCBOR.encode(
      new Map<string, unknown>([
        ['fmt', 'none'],
        ['attStmt', new Map()],
        ['authData', this.authData(true)],
      ]) as never,
    );
    return {
      id: this.id,
      rawId: this.id,
      type: 'public-key',
      response: {
        clientDataJSON: b64u(this.clientData('webauthn.create', challenge, origin)),
        attestationObject: b64u(attestationObject),
        transports: ['internal'],
      },
      authenticatorAttachment: 'platform',
      clientExtensionResults: {},
    };
  }

  /** An assertion over `challenge`; the counter moves up one first. */
  assert(challenge: string, origin = this.origin): AuthenticationResponseJSON {
    this.counter += 1;
    const authenticatorData = this.authData(false);
    const clientDataJSON = this.clientData('webauthn.get', challenge, origin);
    const signature = sign('sha256', Buffer.concat([authenticatorData, sha256(clientDataJSON)]), this.keys.privateKey);
    return {
      id: this.id,
      rawId: this.id,
      type: 'public-key',
      response: {
        clientDataJSON: b64u(clientDataJSON),
        authenticatorData: b64u(authenticatorData),
        signature: b64u(signature),
      },
      authenticatorAttachment: 'platform',
      clientExtensionResults: {},
    };
  }
}

/** A challenge no server handed out. */
export const strayChallenge = (): string => randomBytes(32).toString('base64url');
