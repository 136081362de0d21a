import type { Db } from '../db/knex';
import { generateKey, KeyMode } from '../keys/keys';
import { checkoutScopes, CheckoutScope } from '../keys/scopes';
import { OpsError } from './errors';

export interface CheckoutKeyOut {
  key: string;
  key_id: string;
  merchant_id: string;
  mode: KeyMode;
  type: 'secret' | 'publishable';
  scopes: string[];
}

/** Issues a Checkout key (secret `svc_ck_…` or publishable `svc_pk_…`); shown once, stored hashed. */
export async function createCheckoutKey(
  db: Db,
  input: {
    merchantId: string;
    mode: KeyMode;
    type: 'secret' | 'publishable';
    scopes?: CheckoutScope[];
    keyId?: string;
    secret?: string;
  },
): Promise<CheckoutKeyOut> {
  const merchant = await db('merchants').where({ id: input.merchantId }).first('id');
  if (!merchant) throw new OpsError('merchant_not_found', `no merchant ${input.merchantId}`);
  const scopes = input.scopes ?? [...checkoutScopes];
  const { key, keyId, secretHash } = generateKey(input.type === 'secret' ? 'ck' : 'pk', input.mode, input);
  await db('checkout_keys').insert({
    id: keyId,
    merchant_id: input.merchantId,
    mode: input.mode,
    type: input.type,
    secret_hash: secretHash,
    scopes,
  });
  return { key, key_id: keyId, merchant_id: input.merchantId, mode: input.mode, type: input.type, scopes };
}

/**
 * Revokes a Checkout key; effective on the next request. A key rolled with a later expiry stops
 * now; an earlier revocation stands. `owner` limits it to one merchant's keys of one mode (the console).
 */
export async function revokeCheckoutKey(
  db: Db,
  keyId: string,
  owner?: { merchantId: string; mode: KeyMode },
): Promise<{ key_id: string; revoked_at: string }> {
  const [row] = await db('checkout_keys')
    .where({ id: keyId, ...(owner && { merchant_id: owner.merchantId, mode: owner.mode }) })
    .update({ revoked_at: db.raw('least(coalesce(revoked_at, now()), now())') })
    .returning(['id', 'revoked_at']);
  if (!row) throw new OpsError('key_not_found', `no checkout key ${keyId}`);
  return { key_id: row.id, revoked_at: new Date(row.revoked_at).toISOString() };
}

/** The longest a rolled key keeps working beside its successor. */
export const ROLL_MAX_EXPIRY_SECONDS = 7 * 86_400;

/**
 * Rolls a Checkout key: a new key of the same merchant, mode, type and scopes (shown once, stored
 * hashed), and the old one stops `expiresInSeconds` from now (0: at once), never later than an
 * expiry it already had. A revoked or expired key, a hosted page key, or another merchant's or
 * mode's, is `key_not_found`.
 */
export async function rollCheckoutKey(
  db: Db,
  input: { keyId: string; merchantId: string; mode: KeyMode; expiresInSeconds: number },
): Promise<{ created: CheckoutKeyOut; old_key_id: string; old_expires_at: string }> {
  if (!Number.isInteger(input.expiresInSeconds) || input.expiresInSeconds < 0) {
    throw new OpsError('invalid_expiry', 'the expiry is a whole number of seconds, 0 or more');
  }
  if (input.expiresInSeconds > ROLL_MAX_EXPIRY_SECONDS) {
    throw new OpsError('invalid_expiry', `a rolled key expires within ${ROLL_MAX_EXPIRY_SECONDS} seconds`);
  }
  return db.transaction(async (trx) => {
    const old = await trx('checkout_keys')
      .where({ id: input.keyId, merchant_id: input.merchantId, mode: input.mode })
      .where((q) => q.whereNull('revoked_at').orWhere('revoked_at', '>', trx.fn.now()))
      // The hosted page's own key is replaced by the service when revoked, never rolled.
      .whereNotExists((q) =>
        q.select(trx.raw('1')).from('hosted_page_keys as h').whereRaw('h.key_id = checkout_keys.id'),
      )
      .forUpdate()
      .first('id', 'type', 'scopes');
    if (!old) throw new OpsError('key_not_found', `no live checkout key ${input.keyId}`);
    const created = await createCheckoutKey(trx, {
      merchantId: input.merchantId,
      mode: input.mode,
      type: old.type,
      scopes: old.scopes,
    });
    const [row] = await trx('checkout_keys')
      .where({ id: old.id })
      .update({
        revoked_at: trx.raw(`least(coalesce(revoked_at, 'infinity'), now() + make_interval(secs => ?))`, [
          input.expiresInSeconds,
        ]),
      })
      .returning(['revoked_at']);
    return { created, old_key_id: old.id, old_expires_at: new Date(row.revoked_at).toISOString() };
  });
}
