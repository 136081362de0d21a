import type { Db } from '../db/knex';
import { generateKey, KeyMode } from '../keys/keys';
import { PartnerScope } from '../keys/scopes';
import { OpsError } from './errors';

export interface PartnerKeyOut {
  key: string;
  key_id: string;
  seller_id: string;
  scopes: string[];
  env: KeyMode;
}

/** Issues a Partner key; the full key is returned once and only its secret's hash is stored. */
export async function createPartnerKey(
  db: Db,
  input: { sellerId: string; env: KeyMode; scopes: PartnerScope[]; keyId?: string; secret?: string },
): Promise<PartnerKeyOut> {
  const seller = await db('sellers').where({ id: input.sellerId }).first('id');
  if (!seller) throw new OpsError('seller_not_found', `no seller ${input.sellerId}`);
  const { key, keyId, secretHash } = generateKey('sk', input.env, input);
  await db('partner_keys').insert({
    id: keyId,
    seller_id: input.sellerId,
    env: input.env,
    secret_hash: secretHash,
    scopes: input.scopes,
  });
  return { key, key_id: keyId, seller_id: input.sellerId, scopes: input.scopes, env: input.env };
}

/** Revokes a Partner key (`sellerId`: only that seller's); effective on the next request. Revoking twice keeps the first time. */
export async function revokePartnerKey(
  db: Db,
  keyId: string,
  opts: { sellerId?: string } = {},
): Promise<{ key_id: string; revoked_at: string }> {
  const [row] = await db('partner_keys')
    .where({ id: keyId, ...(opts.sellerId !== undefined && { seller_id: opts.sellerId }) })
    .update({ revoked_at: db.raw('coalesce(revoked_at, now())') })
    .returning(['id', 'revoked_at']);
  if (!row) throw new OpsError('key_not_found', `no partner key ${keyId}`);
  return { key_id: row.id, revoked_at: new Date(row.revoked_at).toISOString() };
}

/** Replaces a Partner key's scopes (a revoked key's too: it stays revoked). `sellerId` limits it to that seller's keys. */
export async function setPartnerKeyScopes(
  db: Db,
  keyId: string,
  scopes: PartnerScope[],
  opts: { sellerId?: string } = {},
): Promise<{ key_id: string; scopes: string[] }> {
  const [row] = await db('partner_keys')
    .where({ id: keyId, ...(opts.sellerId !== undefined && { seller_id: opts.sellerId }) })
    .update({ scopes })
    .returning(['id', 'scopes']);
  if (!row) throw new OpsError('key_not_found', `no partner key ${keyId}`);
  return { key_id: row.id, scopes: row.scopes };
}
