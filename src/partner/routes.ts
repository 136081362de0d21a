import Router from '@koa/router';
import type { AppDeps } from '../app';

/** The Partner API under `/partner/v1`. */
export function partnerRouter(_deps: AppDeps): Router {
  const router = new Router({ prefix: '/partner/v1' });

  router.get('/health', (ctx) => {
    ctx.body = { status: 'ok', api: 'partner', version: 'v1', currency: 'IQD' };
  });

  return router;
}
