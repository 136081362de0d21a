import type { Context, Middleware } from 'koa';
import type { Db } from '../db/knex';
import { bearer, hashSecret, parseKey, secretMatches } from '../keys/keys';
import { partnerKeyUse } from '../keys/last-used';
import type { Clock } from '../lib/clock';
import type { PartnerScope } from '../keys/scopes';
import { ApiError } from './errors';
import { PartnerClaim, partnerClaimCtes } from './idempotency';

export interface PartnerPrincipal {
  keyId: string;
  sellerId: string;
  scopes: string[];
}

declare module 'koa' {
  interface DefaultState {
    partner: PartnerPrincipal;
  }
}

const ENV_OF_MODE = { test: 'sandbox', live: 'live' } as const;

/**
 * Partner key check, then scope: a well-formed key of the other environment is refused before
 * lookup; unknown, revoked or wrong-secret keys are all `invalid_api_key`.
 *
 * With `claimFor` (write routes), the statement that reads the key also claims the request's
 * Idempotency-Key (and counts its rate limit), but only for a key that passes the checks in SQL:
 * the hash equal, the scope held. The decision is still the constant-time compare here; the SQL
 * `=` compares SHA-256 digests, whose timing tells nothing about the secret (as the Checkout key
 * check does). The Idempotency-Key middleware then takes the outcome from `ctx.state`. A key whose
 * secret matched is recorded as used (at most one write a minute, off the request's path).
 */
export function partnerAuth(
  { db, clock, environment }: { db: Db; clock: Clock; environment: 'sandbox' | 'live' },
  scope: PartnerScope,
  claimFor?: (ctx: Context, keyId: string) => PartnerClaim | null,
): Middleware {
  return async (ctx, next) => {
    const token = bearer(ctx.get('authorization'));
    const parsed = token ? parseKey(token) : null;
    if (!parsed || parsed.kind !== 'sk') throw ApiError.unauthorized();
    if (ENV_OF_MODE[parsed.mode] !== environment) {
      throw ApiError.unauthorized(
        'api_key_wrong_environment',
        `This is a ${parsed.mode} key, which works only in ${ENV_OF_MODE[parsed.mode]}; this is ${environment}.`,
      );
    }
    const claim = claimFor?.(ctx, parsed.keyId) ?? null;
    const row = await readKey(db, parsed, scope, claim);
    if (!row || !secretMatches(parsed.secret, row.secret_hash)) throw ApiError.unauthorized();
    partnerKeyUse.record(db, parsed.keyId, clock());
    if (!row.scopes.includes(scope)) throw ApiError.insufficientScope(scope);
    ctx.state.partner = { keyId: parsed.keyId, sellerId: row.seller_id, scopes: row.scopes };
    if (claim) ctx.state.partnerClaim = { claim, outcome: { claimed: row.claimed, hits: row.hits } };
    return next();
  };
}

interface KeyRow {
  seller_id: string;
  secret_hash: string;
  scopes: string[];
  claimed: boolean;
  hits: number | null;
}

/** The live key `parsed` names (raw SQL: this runs on every Partner request), and the outcome of `claim` if given. */
async function readKey(
  db: Db,
  parsed: { keyId: string; mode: string; secret: string },
  scope: PartnerScope,
  claim: PartnerClaim | null,
): Promise<KeyRow | undefined> {
  const key = 'SELECT seller_id, secret_hash, scopes FROM partner_keys WHERE id = ? AND env = ? AND revoked_at IS NULL';
  if (!claim) {
    const { rows } = await db.raw(key, [parsed.keyId, parsed.mode]);
    return rows[0] && { ...rows[0], claimed: false, hits: null };
  }
  const ctes = partnerClaimCtes(claim, {
    sql: 'EXISTS (SELECT 1 FROM k WHERE k.secret_hash = ? AND ? = ANY(k.scopes))',
    bindings: [hashSecret(parsed.secret), scope],
  });
  const { rows } = await db.raw(
    `WITH k AS (${key}), ${ctes.sql}
     SELECT k.*, EXISTS (SELECT 1 FROM claim) AS claimed, (SELECT count FROM hit) AS hits FROM k`,
    [parsed.keyId, parsed.mode, ...ctes.bindings],
  );
  return rows[0];
}
