import Koa from 'koa';
import compose from 'koa-compose';
import { jsonBody } from './http/body';
import { checkoutErrors, partnerErrors } from './http/error-envelope';
import { checkoutRequestId, partnerRequestId } from './http/request-id';
import { requestLog } from './http/request-log';
import { partnerRouter } from './partner/routes';
import { checkoutRouter } from './checkout/routes';
import { hostedStack } from './hosted/routes';
import { CONSOLE_PREFIX, consoleDeps, consoleStack } from './console/routes';
import type { AppDeps } from './deps';
import { docsPage } from './openapi/routes';
import { httpMetrics, traceRequests } from './telemetry/http';

/** Mounts `middleware` only for paths under `prefix` (a whole segment), which it then owns entirely. */
function under(prefix: string, middleware: Koa.Middleware<any, any>[]): Koa.Middleware {
  const composed = compose(middleware);
  return (ctx, next) =>
    ctx.path === prefix || ctx.path.startsWith(`${prefix}/`) ? composed(ctx, async () => undefined) : next();
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

/**
 * The whole HTTP surface: Partner API, Checkout API, the hosted page (which calls the `/v1` stack)
 * and the seller and merchant console (`/console`, docs/console.md).
 */
export function createApp(deps: AppDeps): Koa {
  // The client IP (per-IP limits) is the connection's address unless TRUST_PROXY names the proxy
  // hops in front, whose appended X-Forwarded-For entries are then believed (never the client's own).
  const hops = deps.settings.TRUST_PROXY;
  const app = new Koa({ proxy: hops > 0, maxIpsCount: hops });
  app.silent = true; // errors are rendered and logged by the per-API middleware
  app.use(traceRequests);
  app.use(requestLog);
  app.use(httpMetrics);
  app.use(partnerStack(deps, partnerRouter(deps)));
  const checkout = checkoutStack(deps, checkoutRouter(deps));
  app.use(checkout);
  app.use(hostedStack(deps, checkout));
  app.use(under(CONSOLE_PREFIX, [consoleStack(consoleDeps(deps))]));
  app.use(docsPage);
  // Any other path: a 404 with a small JSON body. Koa turns a body set on its default 404 into a
  // 200, so the status is set again after the body.
  app.use(async (ctx, next) => {
    await next();
    if (ctx.body === undefined && ctx.status === 404) {
      ctx.body = { message: 'Not Found', type: 'not_found' };
      ctx.status = 404;
    }
  });
  return app;
}
