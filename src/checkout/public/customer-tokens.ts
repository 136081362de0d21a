import type { Db } from '../../db/knex';
import { constantTimeEqual, sha256Hex } from '../../lib/hash';
import { randomString } from '../../lib/ids';
import { customerTokenTtlMs } from '../public-limits';

const ID_LENGTH = 16;
const SECRET_LENGTH = 32;
/** `ctok_<id>_<secret>`: looked up by id, the secret's hash compared in constant time. */
const TOKEN = new RegExp(`^ctok_([A-Za-z0-9]{${ID_LENGTH}})_([A-Za-z0-9]{${SECRET_LENGTH}})$`);

/** Issues a customer token for `sessionId` (in the caller's transaction); only its hash is stored. */
export async function issueCustomerToken(
  trx: Db,
  input: { sessionId: string; phone: string; now: Date },
): Promise<{ token: string; expiresAt: Date }> {
  const id = randomString(ID_LENGTH);
  const secret = randomString(SECRET_LENGTH);
  const expiresAt = new Date(input.now.getTime() + customerTokenTtlMs);
  await trx('customer_tokens').insert({
    id,
    session_id: input.sessionId,
    phone: input.phone,
    secret_hash: sha256Hex(secret),
    expires_at: expiresAt,
    created_at: input.now,
  });
  return { token: `ctok_${id}_${secret}`, expiresAt };
}

/** True when `token` was issued by `sessionId` and has not expired; a token of another session is not. */
export async function customerTokenValid(
  db: Db,
  sessionId: string,
  token: string | undefined,
  now: Date,
): Promise<boolean> {
  const parsed = token ? TOKEN.exec(token) : null;
  if (!parsed) return false;
  const row: { secret_hash: string; expires_at: Date } | undefined = await db('customer_tokens')
    .where({ id: parsed[1], session_id: sessionId })
    .first('secret_hash', 'expires_at');
  if (!row || new Date(row.expires_at).getTime() <= now.getTime()) return false;
  return constantTimeEqual(sha256Hex(parsed[2]), row.secret_hash);
}
