import Router from '@koa/router';
import compose from 'koa-compose';
import type { Middleware } from 'koa';
import type { AppDeps } from '../deps';
import { SERVICE_UNAVAILABLE_RETRY_AFTER_SECONDS } from '../http/errors';
import { routeTemplate } from '../http/request-log';
import { dependencyUnavailable } from '../http/unavailable';
import { log } from '../lib/log';
import { webhookRuntime } from '../webhooks/runtime';
import { gatewayDecide, gatewayPage, returnPage } from './attempt-pages';
import { checkoutPage } from './checkout-page';
import type { HostedDeps } from './deps';
import { hostedKeys } from './hosted-keys';
import { attemptOwner } from './owners';
import { PageResponse } from './page-response';
import { inProcessPublicClient } from './public-client';
import { relay } from './relay';
import { serveStatic } from './static-assets';

/**
 * A fault in the hosted pages is a plain error page, logged like the APIs' 500s (never a stack
 * trace to the shopper); a dependency past its deadline is the same page as a 503 with Retry-After.
 */
const hostedErrors: Middleware = async (ctx, next) => {
  try {
    await next();
  } catch (err) {
    const unavailable = dependencyUnavailable(ctx, err);
    if (!unavailable) log.error('hosted page failed', { method: ctx.method, route: routeTemplate(ctx), error: err });
    else ctx.set('Retry-After', String(SERVICE_UNAVAILABLE_RETRY_AFTER_SECONDS));
    const out = new PageResponse(ctx, false, null);
    out.message(unavailable ? 503 : 500, { title: 'unavailable_title', body: 'unavailable_body' });
  }
};

const HOSTED_PREFIXES = ['/c/', '/t/', '/r/', '/hosted/'];

/**
 * The hosted checkout pages, mounted beside the APIs: `/c/<code>`, `/t/<attempt_id>`,
 * `/r/<attempt_id>`, the script relay under `/hosted/api/public/` and the static assets. They
 * talk to the service only through `publicApi` (the `/v1` stack) with the merchant's hosted-page
 * publishable key.
 */
export function hostedStack(deps: AppDeps, publicApi: Middleware): Middleware {
  const secureCookies = deps.settings.PUBLIC_BASE_URL.startsWith('https:');
  const hosted: HostedDeps = {
    db: deps.db,
    api: inProcessPublicClient(publicApi),
    keys: hostedKeys(deps.db, (deps.webhooks ?? webhookRuntime(deps.settings)).cipher),
    testPhone: deps.settings.TEST_PHONE,
    secureCookies,
    publicOrigin: new URL(deps.settings.PUBLIC_BASE_URL).origin,
  };
  const router = new Router();
  router.get('/c/:code', (ctx) => checkoutPage(hosted, ctx));
  router.get('/t/:attemptId', (ctx) => gatewayPage(hosted, ctx));
  router.post('/t/:attemptId', (ctx) => gatewayDecide(hosted, ctx));
  router.get('/r/:attemptId', (ctx) => returnPage(hosted, ctx));
  const keyForAttempt = async (attemptId: string) => {
    const owner = await attemptOwner(hosted.db, attemptId);
    return owner && hosted.keys.forMerchant(owner.merchant_id, owner.mode);
  };
  const relayed = relay(hosted.api, { secureCookies, keyForAttempt });
  const stack = compose<any>([hostedErrors, serveStatic, relayed, router.routes()]);
  return (ctx, next) => (HOSTED_PREFIXES.some((p) => ctx.path.startsWith(p)) ? stack(ctx, next) : next());
}
