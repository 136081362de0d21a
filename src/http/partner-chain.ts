import type { Middleware } from 'koa';
import type { Db } from '../db/knex';
import type { Clock } from '../lib/clock';
import type { PartnerScope } from '../keys/scopes';
import { renderPartnerError } from './error-envelope';
import { partnerIdempotency } from './idempotency';
import { partnerAuth } from './partner-auth';
import { rateLimit, WindowLimit } from './rate-limit';

export interface PartnerChainDeps {
  db: Db;
  clock: Clock;
  environment: 'sandbox' | 'live';
  bulkLimit: WindowLimit;
}

export interface PartnerRouteOptions {
  scope: PartnerScope;
  /** Write routes: the route name idempotency records are scoped by. */
  idempotent?: string;
  /** Bulk routes: counted against the bulk limit under this name, separately per route. */
  rateLimited?: string;
}

/**
 * The Partner check order: key, scope, Idempotency-Key, stored outcome, rate limit, then the
 * route's own body and row checks (the middlewares that follow).
 */
export function partnerChain(deps: PartnerChainDeps, opts: PartnerRouteOptions): Middleware[] {
  const policy = opts.rateLimited;
  const counted = policy && {
    policy,
    limit: deps.bulkLimit,
    bucket: (keyId: string) => `partner:${keyId}:${policy}`,
  };
  // A write route claims its Idempotency-Key (counting the limit, after any replay) in the
  // statement that reads the key.
  const idempotency = opts.idempotent
    ? partnerIdempotency(deps.db, deps.clock, opts.idempotent, renderPartnerError, counted || undefined)
    : undefined;
  const chain: Middleware[] = [partnerAuth(deps, opts.scope, idempotency?.claimFor)];
  if (idempotency) chain.push(idempotency.middleware);
  else if (counted) {
    chain.push(
      rateLimit(deps.db, deps.clock, counted.policy, counted.limit, (ctx) => counted.bucket(ctx.state.partner.keyId)),
    );
  }
  return chain;
}
