import {
  generateAuthenticationOptions,
  generateRegistrationOptions,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
  type AuthenticationResponseJSON,
  type AuthenticatorTransport,
  type PublicKeyCredentialCreationOptionsJSON,
  type PublicKeyCredentialRequestOptionsJSON,
  type RegistrationResponseJSON,
} from '@simplewebauthn/server';
import type { Db } from '../db/knex';
import { newId } from '../lib/ids';
import { sha256Hex } from '../lib/hash';
import { log } from '../lib/log';
import type { ConsoleUser } from './accounts';

/** A challenge handed out works once, for this long. */
export const CHALLENGE_TTL_MS = 5 * 60_000;
/** How long the browser's prompt waits. */
const PROMPT_TIMEOUT_MS = 120_000;
/** Passkeys per user. */
export const MAX_PASSKEYS = 20;
const NAME_MAX = 60;

/** Who the passkeys are for: the console's origin (PUBLIC_BASE_URL's) and its host name as the RP ID. */
export interface RelyingParty {
  origin: string;
  rpID: string;
  rpName: string;
}

export const relyingParty = (origin: string): RelyingParty => ({
  origin,
  rpID: new URL(origin).hostname,
  rpName: 'Console',
});

/**
 * What a challenge is for: registering a passkey, the sign-in's second factor, or re-authenticating
 * a signed-in session (a passkey alone, with user verification: docs/decisions.md).
 */
type Purpose = 'register' | 'authenticate' | 'reauth';
/** An assertion's purpose. */
export type AssertionPurpose = Exclude<Purpose, 'register'>;

const challengeHash = (challenge: string) => sha256Hex(`console-webauthn:${challenge}`);

/**
 * Records a challenge for `sessionId` (only its hash, expiring after CHALLENGE_TTL_MS); an
 * earlier one of the same purpose for the session is dropped, and so are expired ones.
 */
async function storeChallenge(db: Db, sessionId: string, purpose: Purpose, challenge: string, now: Date) {
  await db.transaction(async (trx) => {
    await trx('console_webauthn_challenges')
      .where({ session_id: sessionId, purpose })
      .orWhere('expires_at', '<', now)
      .delete();
    await trx('console_webauthn_challenges').insert({
      session_id: sessionId,
      purpose,
      challenge_hash: challengeHash(challenge),
      expires_at: new Date(now.getTime() + CHALLENGE_TTL_MS),
    });
  });
}

/** The challenge a browser's response signed (from its clientDataJSON), or null if unreadable. */
function signedChallenge(response: { response?: { clientDataJSON?: unknown } }): string | null {
  const data = response.response?.clientDataJSON;
  if (typeof data !== 'string') return null;
  try {
    const parsed = JSON.parse(Buffer.from(data, 'base64url').toString('utf8')) as { challenge?: unknown };
    return typeof parsed.challenge === 'string' ? parsed.challenge : null;
  } catch {
    return null;
  }
}

/**
 * Takes (deletes) the session's live challenge of `purpose` that the response signed: a
 * challenge works once, for its own session only. Null when there is none.
 */
async function takeChallenge(
  db: Db,
  sessionId: string,
  purpose: Purpose,
  response: { response?: { clientDataJSON?: unknown } },
  now: Date,
): Promise<string | null> {
  const challenge = signedChallenge(response);
  if (!challenge) return null;
  const taken = await db('console_webauthn_challenges')
    .where({ session_id: sessionId, purpose, challenge_hash: challengeHash(challenge) })
    .where('expires_at', '>', now)
    .delete()
    .returning('id');
  return taken.length > 0 ? challenge : null;
}

/** A browser's response as posted (the `response` form field, JSON); null when it is not JSON of the right shape. */
export function parseResponse<T extends RegistrationResponseJSON | AuthenticationResponseJSON>(raw: string): T | null {
  try {
    const value = JSON.parse(raw) as T;
    return value && typeof value === 'object' && typeof value.id === 'string' && typeof value.response === 'object'
      ? value
      : null;
  } catch {
    return null;
  }
}

export interface PasskeyRow {
  id: string;
  name: string;
  created_at: Date;
  last_used_at: Date | null;
}

export async function passkeysOf(db: Db, userId: string): Promise<PasskeyRow[]> {
  return db('console_passkeys')
    .where({ user_id: userId })
    .orderBy('created_at')
    .select('id', 'name', 'created_at', 'last_used_at');
}

export async function hasPasskey(db: Db, userId: string): Promise<boolean> {
  return !!(await db('console_passkeys').where({ user_id: userId }).first('id'));
}

/** Options for registering a new passkey of `user` (its existing ones excluded), the challenge kept for the session. */
export async function registrationOptions(
  db: Db,
  rp: RelyingParty,
  user: ConsoleUser,
  sessionId: string,
  now: Date,
): Promise<PublicKeyCredentialCreationOptionsJSON> {
  const existing = await db('console_passkeys').where({ user_id: user.id }).select('credential_id', 'transports');
  const options = await generateRegistrationOptions({
    rpName: rp.rpName,
    rpID: rp.rpID,
    userName: user.email,
    userID: Buffer.from(user.id, 'utf8'),
    attestationType: 'none',
    timeout: PROMPT_TIMEOUT_MS,
    excludeCredentials: existing.map((c: { credential_id: string; transports: string[] }) => ({
      id: c.credential_id,
      transports: c.transports as AuthenticatorTransport[],
    })),
    authenticatorSelection: { residentKey: 'preferred', userVerification: 'preferred' },
  });
  await storeChallenge(db, sessionId, 'register', options.challenge, now);
  return options;
}

export type RegisterResult =
  | { ok: true; id: string }
  | { ok: false; reason: 'bad_response' | 'no_challenge' | 'not_verified' | 'duplicate' | 'too_many' };

/** Verifies a registration response against the session's challenge and stores the passkey. */
export async function registerPasskey(
  db: Db,
  rp: RelyingParty,
  input: { user: ConsoleUser; sessionId: string; name: string; response: string; now: Date },
): Promise<RegisterResult> {
  const response = parseResponse<RegistrationResponseJSON>(input.response);
  if (!response) return { ok: false, reason: 'bad_response' };
  const challenge = await takeChallenge(db, input.sessionId, 'register', response, input.now);
  if (!challenge) return { ok: false, reason: 'no_challenge' };
  let verification;
  try {
    verification = await verifyRegistrationResponse({
      response,
      expectedChallenge: challenge,
      expectedOrigin: rp.origin,
      expectedRPID: rp.rpID,
      requireUserVerification: false,
    });
  } catch (err) {
    log.warn('console: passkey registration refused', { reason: (err as Error).message });
    return { ok: false, reason: 'not_verified' };
  }
  if (!verification.verified || !verification.registrationInfo) return { ok: false, reason: 'not_verified' };
  const { credential, credentialBackedUp } = verification.registrationInfo;
  const count = await db('console_passkeys').where({ user_id: input.user.id }).count<{ n: string }[]>('* as n');
  if (Number(count[0].n) >= MAX_PASSKEYS) return { ok: false, reason: 'too_many' };
  const id = newId('cpk');
  const inserted = await db('console_passkeys')
    .insert({
      id,
      user_id: input.user.id,
      credential_id: credential.id,
      public_key: Buffer.from(credential.publicKey),
      counter: credential.counter,
      transports: credential.transports ?? [],
      name: input.name.trim().slice(0, NAME_MAX) || 'Passkey',
      backed_up: credentialBackedUp,
      created_at: input.now,
    })
    .onConflict('credential_id')
    .ignore()
    .returning('id');
  return inserted.length > 0 ? { ok: true, id } : { ok: false, reason: 'duplicate' };
}

/** Removes one of the user's passkeys (their own only); false when there was none. */
export async function removePasskey(db: Db, userId: string, passkeyId: string): Promise<boolean> {
  const rows = await db('console_passkeys').where({ id: passkeyId, user_id: userId }).delete().returning('id');
  return rows.length > 0;
}

/**
 * Options for an assertion by one of `userId`'s passkeys, the challenge kept for the session and
 * `purpose`; null when they have none. Re-authentication requires user verification (the passkey
 * is then both factors); the sign-in's second step only prefers it (the password came first).
 */
export async function authenticationOptions(
  db: Db,
  rp: RelyingParty,
  userId: string,
  sessionId: string,
  now: Date,
  purpose: AssertionPurpose = 'authenticate',
): Promise<PublicKeyCredentialRequestOptionsJSON | null> {
  const keys = await db('console_passkeys').where({ user_id: userId }).select('credential_id', 'transports');
  if (keys.length === 0) return null;
  const options = await generateAuthenticationOptions({
    rpID: rp.rpID,
    timeout: PROMPT_TIMEOUT_MS,
    userVerification: purpose === 'reauth' ? 'required' : 'preferred',
    allowCredentials: keys.map((c: { credential_id: string; transports: string[] }) => ({
      id: c.credential_id,
      transports: c.transports as AuthenticatorTransport[],
    })),
  });
  await storeChallenge(db, sessionId, purpose, options.challenge, now);
  return options;
}

export type AuthenticateResult =
  | { ok: true; passkeyId: string }
  | {
      ok: false;
      reason: 'bad_response' | 'no_challenge' | 'unknown_passkey' | 'not_verified' | 'user_not_verified' | 'counter';
    };

/**
 * Verifies an assertion: the session's challenge of `purpose` (the sign-in's by default), a
 * passkey of the session's user, the signature, for re-authentication the authenticator's user
 * verification (`user_not_verified` otherwise), and a signature counter above the one stored (for
 * authenticators that count); then records the new counter (only if no other use moved it
 * meanwhile) and when it was used.
 */
export async function authenticatePasskey(
  db: Db,
  rp: RelyingParty,
  input: { userId: string; sessionId: string; response: string; now: Date; purpose?: AssertionPurpose },
): Promise<AuthenticateResult> {
  const purpose = input.purpose ?? 'authenticate';
  const response = parseResponse<AuthenticationResponseJSON>(input.response);
  if (!response) return { ok: false, reason: 'bad_response' };
  const challenge = await takeChallenge(db, input.sessionId, purpose, response, input.now);
  if (!challenge) return { ok: false, reason: 'no_challenge' };
  const key = await db('console_passkeys')
    .where({ user_id: input.userId, credential_id: response.id })
    .first('id', 'credential_id', 'public_key', 'counter', 'transports');
  if (!key) return { ok: false, reason: 'unknown_passkey' };
  const stored = Number(key.counter);
  let verification;
  try {
    verification = await verifyAuthenticationResponse({
      response,
      expectedChallenge: challenge,
      expectedOrigin: rp.origin,
      expectedRPID: rp.rpID,
      credential: {
        id: key.credential_id,
        publicKey: new Uint8Array(key.public_key as Buffer),
        counter: stored,
        transports: key.transports as AuthenticatorTransport[],
      },
      requireUserVerification: false,
    });
  } catch (err) {
    const message = (err as Error).message;
    log.warn('console: passkey assertion refused', { reason: message });
    return { ok: false, reason: /counter/i.test(message) ? 'counter' : 'not_verified' };
  }
  if (!verification.verified) return { ok: false, reason: 'not_verified' };
  // Checked here rather than by the library, so the audit log can say why.
  if (purpose === 'reauth' && !verification.authenticationInfo.userVerified)
    return { ok: false, reason: 'user_not_verified' };
  const updated = await db('console_passkeys')
    .where({ id: key.id, counter: key.counter })
    .update({ counter: verification.authenticationInfo.newCounter, last_used_at: input.now })
    .returning('id');
  if (updated.length === 0) return { ok: false, reason: 'counter' };
  return { ok: true, passkeyId: key.id };
}
