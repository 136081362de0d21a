import type Router from '@koa/router';
import type { Middleware } from 'koa';
import type { AppDeps } from '../app';
import { secretKeyAuth } from '../http/checkout-auth';
import { renderCheckoutError } from '../http/error-envelope';
import { checkoutIdempotency } from '../http/idempotency';
import { rateLimit } from '../http/rate-limit';
import { input, validate } from '../http/validate';
import type { WebhookDeps } from '../webhooks/deps';
import { endpointOut } from '../webhooks/endpoint-row';
import {
  createEndpoint,
  deleteEndpoint,
  getEndpoint,
  listEndpoints,
  rotateSecret,
  updateEndpoint,
} from '../webhooks/endpoints';
import { redeliverEvent } from '../webhooks/redeliver';
import { WebhookRuntime, webhookRuntime } from '../webhooks/runtime';
import { endpointIn, endpointPatch, testEventIn } from '../webhooks/schemas';
import { sendTestEvent } from '../webhooks/test-event';
import { idParam } from './schemas';

/**
 * Keeps the create response's secret out of the idempotency store: the handler answers with the
 * secret encrypted (`secret_sealed`), which is what gets stored, and this middleware (outside the
 * idempotency one) opens it for the wire, on the first response and on every replay alike.
 */
function openSealedSecret(runtime: WebhookRuntime): Middleware {
  return async (ctx, next) => {
    await next();
    const body = ctx.body as { id?: string; secret_sealed?: string } | undefined;
    if (!body?.secret_sealed || !body.id) return;
    const { secret_sealed: sealed, ...rest } = body;
    ctx.body = { ...rest, secret: runtime.cipher.decrypt(sealed, `idempotency:${body.id}`) };
  };
}

/** Adds the webhook endpoint routes and `POST /events/{id}/redeliver` (all `webhooks:manage`) to the `/v1` router. */
export function webhookRoutes(router: Router, deps: AppDeps): Router {
  const { db, clock, settings } = deps;
  const runtime = deps.webhooks ?? webhookRuntime(settings);
  const webhooks: WebhookDeps = {
    db,
    clock,
    temporal: deps.temporal,
    taskQueue: settings.TEMPORAL_TASK_QUEUE,
    runtime,
  };
  const perKey = rateLimit(
    db,
    clock,
    { limit: settings.CHECKOUT_RATE_LIMIT_PER_SECOND, windowSeconds: 1 },
    (ctx) => `checkout:${ctx.state.checkout.keyId}`,
  );
  const manage = [secretKeyAuth(db, 'webhooks:manage'), perKey];
  const byId = { params: idParam('id') };
  const create = { body: endpointIn };
  const patch = { params: idParam('id'), body: endpointPatch };
  const test = { params: idParam('id'), body: testEventIn };

  router.get('/webhook_endpoints', ...manage, async (ctx) => {
    ctx.body = { data: (await listEndpoints(webhooks, ctx.state.checkout)).map(endpointOut) };
  });

  router.post(
    '/webhook_endpoints',
    ...manage,
    openSealedSecret(runtime),
    checkoutIdempotency(db, clock, 'POST /webhook_endpoints', renderCheckoutError),
    validate(create),
    async (ctx) => {
      const { endpoint, secret } = await createEndpoint(webhooks, ctx.state.checkout, input(ctx, create).body);
      ctx.status = 201;
      ctx.body = {
        ...endpointOut(endpoint),
        secret_sealed: runtime.cipher.encrypt(secret, `idempotency:${endpoint.id}`),
      };
    },
  );

  router.get('/webhook_endpoints/:id', ...manage, validate(byId), async (ctx) => {
    ctx.body = endpointOut(await getEndpoint(webhooks, ctx.state.checkout, ctx.params.id));
  });

  router.patch('/webhook_endpoints/:id', ...manage, validate(patch), async (ctx) => {
    const body = input(ctx, patch).body;
    ctx.body = endpointOut(await updateEndpoint(webhooks, ctx.state.checkout, ctx.params.id, body));
  });

  router.delete('/webhook_endpoints/:id', ...manage, validate(byId), async (ctx) => {
    await deleteEndpoint(webhooks, ctx.state.checkout, ctx.params.id);
    ctx.status = 204;
  });

  router.post('/webhook_endpoints/:id/rotate_secret', ...manage, validate(byId), async (ctx) => {
    const { endpoint, secret } = await rotateSecret(webhooks, ctx.state.checkout, ctx.params.id);
    ctx.body = { ...endpointOut(endpoint), secret };
  });

  router.post('/webhook_endpoints/:id/test', ...manage, validate(test), async (ctx) => {
    const { type } = input(ctx, test).body;
    const { eventId } = await sendTestEvent(webhooks, ctx.state.checkout, ctx.params.id, type);
    ctx.status = 202;
    ctx.body = { event_id: eventId };
  });

  router.post('/events/:id/redeliver', ...manage, validate(byId), async (ctx) => {
    ctx.status = 202;
    ctx.body = { endpoints: await redeliverEvent(webhooks, ctx.state.checkout, ctx.params.id) };
  });

  return router;
}
