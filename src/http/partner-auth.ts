import type { Middleware } from 'koa';
import type { Db } from '../db/knex';
import { bearer, parseKey, secretMatches } from '../keys/keys';
import type { PartnerScope } from '../keys/scopes';
import { ApiError } from './errors';

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
 */
export function partnerAuth(db: Db, environment: 'sandbox' | 'live', scope: PartnerScope): Middleware {
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
    // Raw SQL: this runs on every Partner request, and the query builder costs more than the read.
    const {
      rows: [row],
    } = await db.raw(
      'SELECT seller_id, secret_hash, scopes FROM partner_keys WHERE id = ? AND env = ? AND revoked_at IS NULL',
      [parsed.keyId, parsed.mode],
    );
    if (!row || !secretMatches(parsed.secret, row.secret_hash)) throw ApiError.unauthorized();
    if (!row.scopes.includes(scope)) throw ApiError.insufficientScope(scope);
    ctx.state.partner = { keyId: parsed.keyId, sellerId: row.seller_id, scopes: row.scopes };
    return next();
  };
}
