import type Router from '@koa/router';
import type { Middleware } from 'koa';
import type { AppDeps } from '../deps';
import { secretKeyAuth, testKeysOnly } from '../http/checkout-auth';
import { renderCheckoutError } from '../http/error-envelope';
import { checkoutIdempotency } from '../http/idempotency';
import { input, validate } from '../http/validate';
import type { WebhookDeps } from '../webhooks/deps';
import { endpointOut } from '../webhooks/endpoint-row';
import {
  createEndpoint,
  deleteEndpoint,
  endpointNotFound,
  getEndpoint,
  listEndpoints,
  rotateSecret,
  updateEndpoint,
} from '../webhooks/endpoints';
import { fastForwardEndpoint } from '../webhooks/fast-forward';
import { redeliverEvent } from '../webhooks/redeliver';
import { replayOut, replayWindow } from '../webhooks/replay-window';
import { WebhookRuntime, webhookRuntime } from '../webhooks/runtime';
import { endpointIn, endpointPatch, replayIn, testEventIn } from '../webhooks/schemas';
import { sendTestEvent } from '../webhooks/test-event';
import { isObjectId } from './ids';
import { fastForwardIn, idParam } from './schemas';

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

/** An id that cannot name an endpoint (U+0000, anything but A-Za-z0-9_) is a 404 before any query. */
const endpointId: Middleware = (ctx, next) => {
  if (!isObjectId((ctx as unknown as { params: { id: string } }).params.id)) throw endpointNotFound();
  return next();
};

/** Adds the webhook endpoint routes, `POST /events/{id}/redeliver` and the endpoint fast-forward of test mode (all `webhooks:manage`) to the `/v1` router. */
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
  const manage = [secretKeyAuth(db, clock, settings.CHECKOUT_RATE_LIMIT_PER_SECOND)('webhooks:manage')];
  const byId = { params: idParam('id') };
  const create = { body: endpointIn };
  const patch = { params: idParam('id'), body: endpointPatch };
  const test = { params: idParam('id'), body: testEventIn };
  const replay = { params: idParam('id'), body: replayIn };
  const fastForward = { params: idParam('id'), body: fastForwardIn };

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
      const body = input(ctx, create).body;
      const { endpoint, secret } = await createEndpoint(webhooks, ctx.state.checkout, body, ctx.get('idempotency-key'));
      ctx.status = 201;
      ctx.body = {
        ...endpointOut(endpoint),
        secret_sealed: runtime.cipher.encrypt(secret, `idempotency:${endpoint.id}`),
      };
    },
  );

  router.get('/webhook_endpoints/:id', ...manage, endpointId, validate(byId), async (ctx) => {
    ctx.body = endpointOut(await getEndpoint(webhooks, ctx.state.checkout, ctx.params.id));
  });

  router.patch('/webhook_endpoints/:id', ...manage, endpointId, validate(patch), async (ctx) => {
    const body = input(ctx, patch).body;
    ctx.body = endpointOut(await updateEndpoint(webhooks, ctx.state.checkout, ctx.params.id, body));
  });

  router.delete('/webhook_endpoints/:id', ...manage, endpointId, validate(byId), async (ctx) => {
    await deleteEndpoint(webhooks, ctx.state.checkout, ctx.params.id);
    ctx.status = 204;
  });

  router.post('/webhook_endpoints/:id/rotate_secret', ...manage, endpointId, validate(byId), async (ctx) => {
    const { endpoint, secret } = await rotateSecret(webhooks, ctx.state.checkout, ctx.params.id);
    ctx.body = { ...endpointOut(endpoint), secret };
  });

  router.post('/webhook_endpoints/:id/test', ...manage, endpointId, validate(test), async (ctx) => {
    const { type } = input(ctx, test).body;
    const { eventId } = await sendTestEvent(webhooks, ctx.state.checkout, ctx.params.id, type);
    ctx.status = 202;
    ctx.body = { event_id: eventId };
  });

  router.post(
    '/webhook_endpoints/:id/replay',
    ...manage,
    // The endpoint is part of the idempotency route: one key may replay to two endpoints.
    (ctx, next) =>
      checkoutIdempotency(db, clock, `POST /webhook_endpoints/${ctx.params.id}/replay`, renderCheckoutError)(ctx, next),
    validate(replay),
    async (ctx) => {
      const { params, body } = input(ctx, replay);
      const row = await replayWindow(webhooks, ctx.state.checkout, params.id, ctx.get('idempotency-key'), body);
      ctx.status = 202;
      ctx.body = replayOut(row);
    },
  );

  router.post(
    '/test_helpers/webhook_endpoints/:id/fast_forward',
    ...manage,
    testKeysOnly,
    endpointId,
    validate(fastForward),
    async (ctx) => {
      const { params, body } = input(ctx, fastForward);
      ctx.body = endpointOut(await fastForwardEndpoint(webhooks, ctx.state.checkout, params.id, body.seconds));
    },
  );

  router.post('/events/:id/redeliver', ...manage, validate(byId), async (ctx) => {
    ctx.status = 202;
    ctx.body = { endpoints: await redeliverEvent(webhooks, ctx.state.checkout, ctx.params.id) };
  });

  return router;
}
