import type { Middleware } from 'koa';
import type { Db } from '../db/knex';
import type { Clock } from '../lib/clock';
import { bearer, hashSecret, KeyMode, parseKey, secretMatches } from '../keys/keys';
import type { CheckoutScope } from '../keys/scopes';
import { checkoutKeyUse } from '../keys/last-used';
import { ApiError } from './errors';
import { COUNT_HIT, COUNT_HIT_CONFLICT, rateLimitedError, rateLimitHeaders, windowOf, WindowLimit } from './rate-limit';

export interface CheckoutPrincipal {
  keyId: string;
  merchantId: string;
  mode: KeyMode;
  /** The merchant's display name (workflow summaries in the Temporal UI). */
  merchantName: string;
  /** True when the merchant is a test merchant (the `test` method is only offered when asked for). */
  testMerchant: boolean;
  scopes: string[];
}

declare module 'koa' {
  interface DefaultState {
    checkout: CheckoutPrincipal;
  }
}

/** The publishable key in `header` and its merchant; null when it is not a live publishable key. */
async function authenticatePublishable(
  db: Db,
  clock: Clock,
  header: string | undefined,
): Promise<(CheckoutPrincipal & { suspended: boolean }) | null> {
  const token = bearer(header);
  const parsed = token ? parseKey(token) : null;
  if (!parsed || parsed.kind !== 'pk') return null;
  const row = await db('checkout_keys as k')
    .join('merchants as m', 'm.id', 'k.merchant_id')
    .where({ 'k.id': parsed.keyId, 'k.mode': parsed.mode, 'k.type': 'publishable' })
    // A rolled key works until its expiry (a revoked_at still to come).
    .where((q) => q.whereNull('k.revoked_at').orWhere('k.revoked_at', '>', db.fn.now()))
    .first('k.merchant_id', 'k.secret_hash', 'k.scopes', 'm.suspended', 'm.test_merchant', 'm.display_name');
  if (!row || !secretMatches(parsed.secret, row.secret_hash)) return null;
  checkoutKeyUse.record(db, parsed.keyId, clock());
  return { ...principalOf(parsed, row), suspended: row.suspended };
}

/** Who a verified key acts for, from the parsed key and its row. */
function principalOf(
  parsed: { keyId: string; mode: CheckoutPrincipal['mode'] },
  row: { merchant_id: string; display_name: string; test_merchant: boolean; scopes: CheckoutPrincipal['scopes'] },
): CheckoutPrincipal {
  return {
    keyId: parsed.keyId,
    merchantId: row.merchant_id,
    mode: parsed.mode,
    merchantName: row.display_name,
    testMerchant: row.test_merchant,
    scopes: row.scopes,
  };
}

/**
 * Merchant routes: a secret key (a publishable one is `401 invalid_api_key`), not suspended, with
 * `scope`, then at most `perSecond` requests per key and second (`429 rate_limited`).
 *
 * One statement reads the key and counts the hit in `checkout:<key_id>`. It counts only a request
 * that will pass the three checks (the hash equal, the merchant not suspended, the scope held), as
 * separate steps did; the decision itself is still the constant-time compare here. The SQL `=`
 * compares SHA-256 digests, whose timing tells nothing about the secret. A key whose secret matched
 * is recorded as used (at most one write a minute, off the request's path).
 */
export function secretKeyAuth(db: Db, clock: Clock, perSecond: number) {
  const limit: WindowLimit = { limit: perSecond, windowSeconds: 1 };
  return (scope: CheckoutScope): Middleware =>
    async (ctx, next) => {
      const window = windowOf(limit, clock());
      const token = bearer(ctx.get('authorization'));
      const parsed = token ? parseKey(token) : null;
      const row: KeyAndHits | undefined =
        parsed?.kind === 'ck' ? await keyAndHit(db, parsed, scope, window.start) : undefined;
      if (!parsed || !row || !secretMatches(parsed.secret, row.secret_hash)) {
        throw ApiError.unauthorized('invalid_api_key', 'Missing, malformed, revoked or wrong-type secret key.');
      }
      checkoutKeyUse.record(db, parsed.keyId, clock());
      if (row.suspended) throw ApiError.forbidden('merchant_suspended', 'This merchant account is suspended.');
      if (!row.scopes.includes(scope)) throw ApiError.insufficientScope(scope);
      if (row.hits === null) throw new Error('a key that passed every check was not counted');
      const hit = window.result(row.hits);
      ctx.set(rateLimitHeaders('merchant', limit, hit));
      if (!hit.allowed) throw rateLimitedError(hit, limit);
      ctx.state.checkout = principalOf(parsed, row);
      return next();
    };
}

interface KeyAndHits {
  merchant_id: string;
  secret_hash: string;
  scopes: string[];
  suspended: boolean;
  test_merchant: boolean;
  display_name: string;
  /** This window's count including this request; null when the request was not counted. */
  hits: number | null;
}

/** The live secret key `parsed` names, and its window's count after this request (one round trip). */
async function keyAndHit(
  db: Db,
  parsed: { keyId: string; mode: KeyMode; secret: string },
  scope: CheckoutScope,
  windowStart: Date,
): Promise<KeyAndHits | undefined> {
  const { rows } = await db.raw(
    `WITH k AS (
       SELECT k.merchant_id, k.secret_hash, k.scopes, m.suspended, m.test_merchant, m.display_name
         FROM checkout_keys k JOIN merchants m ON m.id = k.merchant_id
        WHERE k.id = ? AND k.mode = ? AND k.type = 'secret'
          AND (k.revoked_at IS NULL OR k.revoked_at > now())
     ), hit AS (
       ${COUNT_HIT} SELECT ?, ?, 1 FROM k WHERE k.secret_hash = ? AND NOT k.suspended AND ? = ANY(k.scopes)
       ${COUNT_HIT_CONFLICT}
     )
     SELECT k.*, (SELECT count FROM hit) AS hits FROM k`,
    [parsed.keyId, parsed.mode, `checkout:${parsed.keyId}`, windowStart, hashSecret(parsed.secret), scope],
  );
  return rows[0];
}

/** Public routes: a publishable key of a merchant that is not suspended (recorded as used, as secret keys are). */
export function publishableKeyAuth(db: Db, clock: Clock): Middleware {
  return async (ctx, next) => {
    const principal = await authenticatePublishable(db, clock, ctx.get('authorization'));
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

/** Test helpers act on test objects only: after the key check, a live key is `403 forbidden` before anything else is read. */
export const testKeysOnly: Middleware = (ctx, next) => {
  if (ctx.state.checkout.mode !== 'test') throw ApiError.forbidden('forbidden', 'Test helpers take test keys only.');
  return next();
};
