import type Router from '@koa/router';
import type { Middleware } from 'koa';
import type { AppDeps } from '../deps';
import { secretKeyAuth } from '../http/checkout-auth';
import { ApiError } from '../http/errors';
import { input, validate } from '../http/validate';
import type { CheckoutScope } from '../keys/scopes';
import { webhookRuntime } from '../webhooks/runtime';
import { endpointOut } from '../webhooks/endpoint-row';
import { fastForwardEndpoint } from '../webhooks/fast-forward';
import { fastForwardIn, idParam } from './schemas';
import { fastForwardSession } from './sessions/fast-forward';
import { sessionOut } from './sessions/session-row';

/** Test helpers act on test objects only: a live key is `403 forbidden` before anything else is read. */
const testKeysOnly: Middleware = (ctx, next) => {
  if (ctx.state.checkout.mode !== 'test') throw ApiError.forbidden('forbidden', 'Test helpers take test keys only.');
  return next();
};

/**
 * Adds test mode's helpers to the `/v1` router: fast-forward of a session's or a webhook
 * endpoint's clocks, so an integrator sees expiry, a timeout or the 3-day disable in seconds.
 */
export function testHelperRoutes(router: Router, deps: AppDeps): Router {
  const { db, clock, settings } = deps;
  const keyAuth = secretKeyAuth(db, clock, settings.CHECKOUT_RATE_LIMIT_PER_SECOND);
  const helper = (scope: CheckoutScope) => [keyAuth(scope), testKeysOnly];
  const fastForward = { params: idParam('id'), body: fastForwardIn };
  const taskQueue = settings.TEMPORAL_TASK_QUEUE;
  const sessions = { ...deps, taskQueue, publicBaseUrl: settings.PUBLIC_BASE_URL };
  const webhooks = { ...deps, taskQueue, runtime: deps.webhooks ?? webhookRuntime(settings) };

  router.post(
    '/test_helpers/checkout/sessions/:id/fast_forward',
    ...helper('sessions:write'),
    validate(fastForward),
    async (ctx) => {
      const { params, body } = input(ctx, fastForward);
      const session = await fastForwardSession(sessions, ctx.state.checkout, params.id, body.seconds);
      ctx.body = sessionOut(session, settings.PUBLIC_BASE_URL);
    },
  );

  router.post(
    '/test_helpers/webhook_endpoints/:id/fast_forward',
    ...helper('webhooks:manage'),
    validate(fastForward),
    async (ctx) => {
      const { params, body } = input(ctx, fastForward);
      ctx.body = endpointOut(await fastForwardEndpoint(webhooks, ctx.state.checkout, params.id, body.seconds));
    },
  );

  return router;
}
