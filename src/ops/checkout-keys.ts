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

/** Revokes a Checkout key; effective on the next request. */
export async function revokeCheckoutKey(db: Db, keyId: string): Promise<{ key_id: string; revoked_at: string }> {
  const [row] = await db('checkout_keys')
    .where({ id: keyId })
    .update({ revoked_at: db.raw('coalesce(revoked_at, now())') })
    .returning(['id', 'revoked_at']);
  if (!row) throw new OpsError('key_not_found', `no checkout key ${keyId}`);
  return { key_id: row.id, revoked_at: new Date(row.revoked_at).toISOString() };
}
