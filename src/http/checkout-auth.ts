import type { Middleware } from 'koa';
import type { Db } from '../db/knex';
import { bearer, KeyMode, parseKey, secretMatches } from '../keys/keys';
import type { CheckoutScope } from '../keys/scopes';
import { ApiError } from './errors';

export interface CheckoutPrincipal {
  keyId: string;
  merchantId: string;
  mode: KeyMode;
  /** True when the merchant is a test merchant (the `test` method is only offered when asked for). */
  testMerchant: boolean;
  scopes: string[];
}

declare module 'koa' {
  interface DefaultState {
    checkout: CheckoutPrincipal;
  }
}

async function authenticate(
  db: Db,
  header: string | undefined,
  kind: 'ck' | 'pk',
): Promise<(CheckoutPrincipal & { suspended: boolean }) | null> {
  const token = bearer(header);
  const parsed = token ? parseKey(token) : null;
  if (!parsed || parsed.kind !== kind) return null;
  const row = await db('checkout_keys as k')
    .join('merchants as m', 'm.id', 'k.merchant_id')
    .where({ 'k.id': parsed.keyId, 'k.mode': parsed.mode, 'k.type': kind === 'ck' ? 'secret' : 'publishable' })
    .whereNull('k.revoked_at')
    .first('k.merchant_id', 'k.secret_hash', 'k.scopes', 'm.suspended', 'm.test_merchant');
  if (!row || !secretMatches(parsed.secret, row.secret_hash)) return null;
  return {
    keyId: parsed.keyId,
    merchantId: row.merchant_id,
    mode: parsed.mode,
    testMerchant: row.test_merchant,
    scopes: row.scopes,
    suspended: row.suspended,
  };
}

/** Merchant routes: a secret key (a publishable one is `401 invalid_api_key`), not suspended, with `scope`. */
export function secretKeyAuth(db: Db, scope: CheckoutScope): Middleware {
  return async (ctx, next) => {
    const principal = await authenticate(db, ctx.get('authorization'), 'ck');
    if (!principal)
      throw ApiError.unauthorized('invalid_api_key', 'Missing, malformed, revoked or wrong-type secret key.');
    if (principal.suspended) throw ApiError.forbidden('merchant_suspended', 'This merchant account is suspended.');
    if (!principal.scopes.includes(scope)) throw ApiError.insufficientScope(scope);
    const { suspended: _suspended, ...rest } = principal;
    ctx.state.checkout = rest;
    return next();
  };
}

/** Public routes: a publishable key of a merchant that is not suspended. */
export function publishableKeyAuth(db: Db): Middleware {
  return async (ctx, next) => {
    const principal = await authenticate(db, ctx.get('authorization'), 'pk');
    if (!principal) {
      throw ApiError.unauthorized(
        'invalid_publishable_key',
        'Missing, malformed, revoked or wrong-type publishable key.',
      );
    }
    if (principal.suspended) throw ApiError.forbidden('merchant_suspended', 'This merchant account is suspended.');
    const { suspended: _suspended, ...rest } = principal;
    ctx.state.checkout = rest;
    return next();
  };
}
