import Koa from 'koa';
import compose from 'koa-compose';
import type { Client } from '@temporalio/client';
import type { Settings } from './config';
import type { Db } from './db/knex';
import type { Clock } from './lib/clock';
import { jsonBody } from './http/body';
import { checkoutErrors, partnerErrors } from './http/error-envelope';
import { checkoutRequestId, partnerRequestId } from './http/request-id';
import { partnerRouter } from './partner/routes';
import { checkoutRouter } from './checkout/routes';
import type { PartnerChainDeps } from './http/partner-chain';
import { webhookRoutes } from './checkout/webhook-routes';
import type { WebhookRuntime } from './webhooks/runtime';
import { hostedStack } from './hosted/routes';

/** What the HTTP app needs from the outside world. */
export interface AppDeps {
  db: Db;
  settings: Settings;
  clock: Clock;
  /** Temporal client; handlers start and signal workflows through it. */
  temporal: Client;
  /** Webhook secrets cipher, resolver and allow-list; built from `settings` when absent. */
  webhooks?: WebhookRuntime;
}

/** Mounts `middleware` only for paths under `prefix` (a whole segment), which it then owns entirely. */
function under(prefix: string, middleware: Koa.Middleware<any, any>[]): Koa.Middleware {
  const composed = compose(middleware);
  return (ctx, next) =>
    ctx.path === prefix || ctx.path.startsWith(`${prefix}/`) ? composed(ctx, async () => undefined) : next();
}

export function partnerChainDeps(deps: AppDeps): PartnerChainDeps {
  return {
    db: deps.db,
    clock: deps.clock,
    environment: deps.settings.PARTNER_ENVIRONMENT,
    bulkLimit: {
      limit: deps.settings.PARTNER_BULK_RATE_LIMIT,
      windowSeconds: deps.settings.PARTNER_BULK_RATE_WINDOW_SECONDS,
    },
  };
}

type AnyRouter = { routes(): Koa.Middleware<any, any>; allowedMethods(): Koa.Middleware<any, any> };

/** Everything under `/partner`: request id, the Partner envelope, the body limit, then `router`. */
export function partnerStack(deps: AppDeps, router: AnyRouter): Koa.Middleware {
  const body = jsonBody(deps.settings.BODY_LIMIT_BYTES);
  return under('/partner', [partnerRequestId, partnerErrors, body, router.routes(), router.allowedMethods()]);
}

/** Everything under `/v1`: request id, the Checkout envelope, the body limit, then `router`. */
export function checkoutStack(deps: AppDeps, router: AnyRouter): Koa.Middleware {
  const body = jsonBody(deps.settings.BODY_LIMIT_BYTES);
  return under('/v1', [checkoutRequestId, checkoutErrors, body, router.routes(), router.allowedMethods()]);
}

/** The whole HTTP surface: Partner API, Checkout API and the hosted page (which calls the `/v1` stack). */
export function createApp(deps: AppDeps): Koa {
  const app = new Koa({ proxy: true });
  app.silent = true; // errors are rendered and logged by the per-API middleware
  app.use(partnerStack(deps, partnerRouter(deps)));
  const checkout = checkoutStack(deps, webhookRoutes(checkoutRouter(deps), deps));
  app.use(checkout);
  app.use(hostedStack(deps, checkout));
  app.use(async (ctx, next) => {
    await next();
    if (ctx.body === undefined && ctx.status === 404) ctx.body = { message: 'Not Found', type: 'not_found' };
  });
  return app;
}
