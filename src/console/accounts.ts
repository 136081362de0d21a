import { randomBytes } from 'node:crypto';
import type { Db } from '../db/knex';
import { newId } from '../lib/ids';
import { OpsError } from '../ops/errors';
import type { SecretCipher } from '../webhooks/secret-crypto';
import { hashPassword, passwordMatches } from './passwords';
import type { ConsoleRole } from './roles';
import { newToken, tokenHash } from './tokens';
import { newTotpSecret, totpStep } from './totp';

/** How long an invite link works. */
export const INVITE_DAYS = 7;
/** Recovery codes made at enrolment; each works once. */
export const RECOVERY_CODE_COUNT = 10;

/** One seller or one merchant: whose data a console user sees. */
export type Tenant = { sellerId: string; merchantId?: undefined } | { merchantId: string; sellerId?: undefined };

export interface ConsoleUser {
  id: string;
  email: string;
  role: ConsoleRole;
  seller_id: string | null;
  merchant_id: string | null;
}

const USER_COLUMNS = ['id', 'email', 'role', 'seller_id', 'merchant_id'] as const;

/** The TOTP secret's associated data: a ciphertext is bound to its user or invite. */
const totpAad = (ownerId: string) => `console-totp:${ownerId}`;

const normalEmail = (email: string) => email.trim();
const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,255}$/;

/**
 * An invite for a new console user of `tenant`: a one-time link (only its hash stored) valid for
 * INVITE_DAYS. The operator CLI makes a tenant's first owner this way.
 */
export async function createInvite(
  db: Db,
  input: Tenant & { email: string; role: ConsoleRole; invitedBy?: string | null; now: Date },
): Promise<{ invite_id: string; token: string; expires_at: string }> {
  const email = normalEmail(input.email);
  if (!EMAIL.test(email)) throw new OpsError('invalid_email', 'email is not an e-mail address');
  if (input.sellerId && !(await db('sellers').where({ id: input.sellerId }).first('id')))
    throw new OpsError('seller_not_found', `no seller ${input.sellerId}`);
  if (input.merchantId && !(await db('merchants').where({ id: input.merchantId }).first('id')))
    throw new OpsError('merchant_not_found', `no merchant ${input.merchantId}`);
  if (await db('console_users').whereRaw('lower(email) = lower(?)', [email]).first('id'))
    throw new OpsError('email_taken', `a console user with e-mail ${email} exists`);
  const token = newToken();
  const id = newId('cinv');
  const expiresAt = new Date(input.now.getTime() + INVITE_DAYS * 86_400_000);
  await db('console_invites').insert({
    id,
    token_hash: tokenHash(token),
    seller_id: input.sellerId ?? null,
    merchant_id: input.merchantId ?? null,
    email,
    role: input.role,
    invited_by: input.invitedBy ?? null,
    created_at: input.now,
    expires_at: expiresAt,
  });
  return { invite_id: id, token, expires_at: expiresAt.toISOString() };
}

export interface OpenInvite {
  id: string;
  email: string;
  role: ConsoleRole;
  seller_id: string | null;
  merchant_id: string | null;
  /** The TOTP secret offered with this invite (the same on every visit). */
  totpSecret: string;
}

/** The unused, unexpired invite of `token`, with its TOTP secret (made on first visit); null otherwise. */
export async function openInvite(db: Db, cipher: SecretCipher, token: string, now: Date): Promise<OpenInvite | null> {
  const row = await db('console_invites')
    .where({ token_hash: tokenHash(token) })
    .whereNull('used_at')
    .whereNull('revoked_at')
    .where('expires_at', '>', now)
    .first();
  if (!row) return null;
  let ciphertext: string | null = row.totp_ciphertext;
  if (!ciphertext) {
    const [updated] = await db('console_invites')
      .where({ id: row.id })
      .update({
        totp_ciphertext: db.raw('coalesce(totp_ciphertext, ?)', [cipher.encrypt(newTotpSecret(), totpAad(row.id))]),
      })
      .returning('totp_ciphertext');
    ciphertext = updated.totp_ciphertext as string;
  }
  return {
    id: row.id,
    email: row.email,
    role: row.role,
    seller_id: row.seller_id,
    merchant_id: row.merchant_id,
    totpSecret: cipher.decrypt(ciphertext, totpAad(row.id)),
  };
}

/**
 * Accepts an invite: the user with its password and TOTP secret (the code proves the app has
 * it), the invite used up (once, under a row lock), and fresh recovery codes, returned once.
 */
export async function acceptInvite(
  db: Db,
  cipher: SecretCipher,
  input: { token: string; password: string; code: string; now: Date },
): Promise<{ user: ConsoleUser; recoveryCodes: string[] } | 'invalid_invite' | 'invalid_code'> {
  const invite = await openInvite(db, cipher, input.token, input.now);
  if (!invite) return 'invalid_invite';
  const step = totpStep(invite.totpSecret, input.code, input.now);
  if (step === null) return 'invalid_code';
  const passwordHash = await hashPassword(input.password);
  return db.transaction(async (trx) => {
    const used = await trx('console_invites')
      .where({ id: invite.id })
      .whereNull('used_at')
      .whereNull('revoked_at')
      .update({ used_at: input.now })
      .returning('id');
    if (used.length === 0) return 'invalid_invite' as const;
    const id = newId('cusr');
    const [user] = await trx('console_users')
      .insert({
        id,
        email: invite.email,
        role: invite.role,
        seller_id: invite.seller_id,
        merchant_id: invite.merchant_id,
        password_hash: passwordHash,
        totp_ciphertext: cipher.encrypt(invite.totpSecret, totpAad(id)),
        totp_last_step: step,
        created_at: input.now,
      })
      .returning([...USER_COLUMNS]);
    const recoveryCodes = await replaceRecoveryCodes(trx, id);
    return { user, recoveryCodes };
  });
}

/** A recovery code as the user reads it: 10 characters in two groups (50 bits each). */
function newRecoveryCode(): string {
  const alphabet = 'abcdefghjkmnpqrstuvwxyz23456789';
  const bytes = randomBytes(10);
  const chars = [...bytes].map((b) => alphabet[b % alphabet.length]).join('');
  return `${chars.slice(0, 5)}-${chars.slice(5)}`;
}
const recoveryHash = (code: string) => tokenHash(`recovery:${code.trim().toLowerCase()}`);

/** Replaces the user's recovery codes with RECOVERY_CODE_COUNT new ones, returned once. */
export async function replaceRecoveryCodes(db: Db, userId: string): Promise<string[]> {
  const codes = Array.from({ length: RECOVERY_CODE_COUNT }, newRecoveryCode);
  await db('console_recovery_codes').where({ user_id: userId }).delete();
  await db('console_recovery_codes').insert(codes.map((c) => ({ user_id: userId, code_hash: recoveryHash(c) })));
  return codes;
}

/** The user of `email` when `password` is theirs (and they are not disabled); the same time either way. */
export async function checkPassword(db: Db, email: string, password: string): Promise<ConsoleUser | null> {
  const row = await db('console_users')
    .whereRaw('lower(email) = lower(?)', [normalEmail(email)])
    .whereNull('disabled_at')
    .first([...USER_COLUMNS, 'password_hash']);
  const ok = await passwordMatches(row?.password_hash ?? null, password);
  if (!row || !ok) return null;
  const { password_hash: _hash, ...user } = row;
  return user as ConsoleUser;
}

/**
 * The second factor: a TOTP code (each time step once) or an unused recovery code (used up).
 * Says which one worked, or null.
 */
export async function checkSecondFactor(
  db: Db,
  cipher: SecretCipher,
  userId: string,
  code: string,
  now: Date,
): Promise<'totp' | 'recovery_code' | null> {
  const trimmed = code.replace(/\s+/g, '');
  if (/^\d{6}$/.test(trimmed)) {
    const row = await db('console_users').where({ id: userId }).first('totp_ciphertext');
    if (!row) return null;
    const step = totpStep(cipher.decrypt(row.totp_ciphertext, totpAad(userId)), trimmed, now);
    if (step === null) return null;
    const updated = await db('console_users')
      .where({ id: userId })
      .where((q) => q.whereNull('totp_last_step').orWhere('totp_last_step', '<', step))
      .update({ totp_last_step: step })
      .returning('id');
    return updated.length > 0 ? 'totp' : null;
  }
  const used = await db('console_recovery_codes')
    .where({ user_id: userId, code_hash: recoveryHash(trimmed) })
    .whereNull('used_at')
    .update({ used_at: now })
    .returning('user_id');
  return used.length > 0 ? 'recovery_code' : null;
}

export async function userById(db: Db, id: string): Promise<ConsoleUser | null> {
  return (
    (await db('console_users')
      .where({ id })
      .whereNull('disabled_at')
      .first([...USER_COLUMNS])) ?? null
  );
}

/**
 * A console user with a password and TOTP secret chosen here, for `ops demo` only (a demo's
 * credentials are printed; a real tenant's first owner comes from an invite).
 */
export async function createDemoUser(
  db: Db,
  cipher: SecretCipher,
  input: Tenant & { email: string; role: ConsoleRole; password: string; totpSecret?: string; now: Date },
): Promise<{ user: ConsoleUser; totpSecret: string }> {
  const id = newId('cusr');
  const totpSecret = input.totpSecret ?? newTotpSecret();
  const [user] = await db('console_users')
    .insert({
      id,
      email: input.email,
      role: input.role,
      seller_id: input.sellerId ?? null,
      merchant_id: input.merchantId ?? null,
      password_hash: await hashPassword(input.password),
      totp_ciphertext: cipher.encrypt(totpSecret, totpAad(id)),
      created_at: input.now,
    })
    .returning([...USER_COLUMNS]);
  return { user, totpSecret };
}
