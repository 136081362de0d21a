import type { Context, Middleware } from 'koa';
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
  const chain: Middleware[] = [partnerAuth(deps.db, deps.environment, opts.scope)];
  const policy = opts.rateLimited;
  const counted = policy && {
    policy,
    limit: deps.bulkLimit,
    bucket: (ctx: Context) => `partner:${ctx.state.partner.keyId}:${policy}`,
  };
  // An idempotent route counts the limit in the statement that claims the key (after any replay).
  if (opts.idempotent) {
    chain.push(partnerIdempotency(deps.db, deps.clock, opts.idempotent, renderPartnerError, counted || undefined));
  } else if (counted) {
    chain.push(rateLimit(deps.db, deps.clock, counted.policy, counted.limit, counted.bucket));
  }
  return chain;
}
