import type { Context, Middleware } from 'koa';
import { log, withRequestScope } from '../lib/log';
import { newRequestId } from './request-id';

/** The router's template of the route that answered (`/v1/checkout/sessions/:id`), or `unmatched`. */
export function routeTemplate(ctx: Context): string {
  const matched = (ctx as Context & { _matchedRoute?: string | RegExp })._matchedRoute;
  return typeof matched === 'string' ? matched : 'unmatched';
}

/** Routes load balancers and uptime checks poll every few seconds: their lines are debug, the rest info. */
const PROBE_ROUTES = new Set(['/partner/v1/health']);

/**
 * One `request` line per request, after it is answered: method, route template, status, duration,
 * request id (and trace id, from the active span), and who called (merchant or seller, key id).
 * Never a path with ids in it, a query, a header or a body. Every line logged while serving the
 * request carries its request id. The APIs replace the id given here by theirs (a valid one sent is
 * kept); the hosted pages keep it. A health probe's line is debug, so probes do not flood the log.
 */
export const requestLog: Middleware = async (ctx, next) => {
  const started = performance.now();
  ctx.state.requestId = newRequestId();
  let status: number | undefined;
  try {
    await withRequestScope(ctx.state, next);
  } catch (err) {
    status = 500; // Koa renders it; the per-API error middleware logged the cause
    throw err;
  } finally {
    const { checkout, partner } = ctx.state;
    const route = routeTemplate(ctx);
    const write = PROBE_ROUTES.has(route) ? log.debug : log.info;
    write('request', {
      method: ctx.method,
      route,
      status: status ?? ctx.status,
      duration_ms: Math.round((performance.now() - started) * 1000) / 1000,
      request_id: ctx.state.requestId,
      ...(checkout ? { merchant_id: checkout.merchantId, key_id: checkout.keyId } : {}),
      ...(partner ? { seller_id: partner.sellerId, key_id: partner.keyId } : {}),
    });
  }
};
