import Router from '@koa/router';
import type { AppDeps } from '../deps';
import { inSnapshot } from '../db/knex';
import { secretKeyAuth, testKeysOnly } from '../http/checkout-auth';
import { renderCheckoutError } from '../http/error-envelope';
import { ApiError } from '../http/errors';
import { checkoutIdempotency } from '../http/idempotency';
import { input, validate } from '../http/validate';
import type { CheckoutScope } from '../keys/scopes';
import { checkoutCursor, listOut } from './cursor';
import { eventOut, getEvent, listEvents } from './events';
import { listMerchantMethods } from './payment-methods';
import { eventListQuery, fastForwardIn, idParam, sessionIn, sessionListQuery } from './schemas';
import { publicRoutes, PublicAdapters } from './public-routes';
import { refundRoutes } from './refund-routes';
import { webhookRoutes } from './webhook-routes';
import { paymentMethodOut } from './serializers';
import { createSession } from './sessions/create-session';
import type { SessionDeps } from './sessions/deps';
import { expireSession } from './sessions/expire-session';
import { fastForwardSession } from './sessions/fast-forward';
import { getSession, listSessions } from './sessions/queries';
import { sessionOut } from './sessions/session-row';
import { eventDeliveries } from '../webhooks/event-deliveries';
import { servedCheckoutDocument } from '../openapi/routes';

/**
 * The Checkout API under `/v1`: the merchant routes (secret key: sessions, refunds, webhook endpoints and events,
 * test mode's fast-forward) and the hosted page's public routes (publishable key); `adapters` swaps the payment vendors or the SMS provider (tests).
 */
export function checkoutRouter(deps: AppDeps, adapters: PublicAdapters = {}): Router {
  const router = new Router({ prefix: '/v1' });
  const { db, clock, temporal, settings } = deps;
  const base = settings.PUBLIC_BASE_URL;
  const sessions: SessionDeps = {
    db,
    clock,
    temporal,
    taskQueue: settings.TEMPORAL_TASK_QUEUE,
    publicBaseUrl: base,
    beforeHandoff: deps.beforeHandoff,
  };
  const keyAuth = secretKeyAuth(db, clock, settings.CHECKOUT_RATE_LIMIT_PER_SECOND);
  const merchant = (scope: CheckoutScope) => [keyAuth(scope)];
  const idempotent = (route: string) => checkoutIdempotency(db, clock, route, renderCheckoutError);
  const listSessionsInput = { query: sessionListQuery };
  const listEventsInput = { query: eventListQuery };

  router.get('/openapi.json', (ctx) => {
    ctx.body = servedCheckoutDocument();
  });

  router.post(
    '/checkout/sessions',
    ...merchant('sessions:write'),
    idempotent('POST /checkout/sessions'),
    validate({ body: sessionIn }),
    async (ctx) => {
      const result = await createSession(sessions, ctx.state.checkout, input(ctx, { body: sessionIn }).body);
      ctx.status = result.created ? 201 : 200;
      ctx.body = sessionOut(result.session, base);
    },
  );

  router.get('/checkout/sessions', ...merchant('sessions:read'), validate(listSessionsInput), async (ctx) => {
    const q = input(ctx, listSessionsInput).query;
    const page = await listSessions(db, ctx.state.checkout, {
      referenceId: q.reference_id,
      status: q.status,
      createdAfter: q.created_after ? new Date(q.created_after) : undefined,
      after: checkoutCursor('sessions', q.cursor),
      limit: q.limit,
    });
    ctx.body = listOut('sessions', page, (s) => sessionOut(s, base));
  });

  router.get('/checkout/sessions/:id', ...merchant('sessions:read'), async (ctx) => {
    const session = await getSession(db, ctx.state.checkout, ctx.params.id);
    if (!session) throw ApiError.notFound('session_not_found', 'No such checkout session.');
    ctx.body = sessionOut(session, base);
  });

  router.post('/checkout/sessions/:id/expire', ...merchant('sessions:write'), async (ctx) => {
    const session = await expireSession(sessions, ctx.state.checkout, ctx.params.id);
    ctx.body = sessionOut(session, base);
  });

  const fastForward = { params: idParam('id'), body: fastForwardIn };
  router.post(
    '/test_helpers/checkout/sessions/:id/fast_forward',
    ...merchant('sessions:write'),
    testKeysOnly,
    validate(fastForward),
    async (ctx) => {
      const { params, body } = input(ctx, fastForward);
      ctx.body = sessionOut(await fastForwardSession(sessions, ctx.state.checkout, params.id, body.seconds), base);
    },
  );

  router.get('/payment_methods', ...merchant('sessions:read'), async (ctx) => {
    const { merchantId, mode } = ctx.state.checkout;
    const methods = await listMerchantMethods(db, merchantId, mode);
    ctx.body = { data: methods.map(paymentMethodOut) };
  });

  router.get('/events', ...merchant('events:read'), validate(listEventsInput), async (ctx) => {
    const q = input(ctx, listEventsInput).query;
    const order = q.direction === 'oldest_first' ? 'asc' : 'desc';
    const list = order === 'asc' ? 'events-asc' : 'events'; // a cursor pages one way only
    const page = await listEvents(db, ctx.state.checkout, {
      type: q.type,
      since: q.since ? new Date(q.since) : undefined,
      deliverySuccess: q.delivery_success === undefined ? undefined : q.delivery_success === 'true',
      after: checkoutCursor(list, q.cursor),
      limit: q.limit,
      order,
    });
    ctx.body = listOut(list, page, eventOut);
  });

  router.get('/events/:id', ...merchant('events:read'), async (ctx) => {
    // The event and its deliveries from one snapshot: one moment.
    ctx.body = await inSnapshot(db, async (trx) => {
      const event = await getEvent(trx, ctx.state.checkout, ctx.params.id);
      if (!event) throw ApiError.notFound('event_not_found', 'No such event.');
      return { ...eventOut(event), deliveries: await eventDeliveries(trx, event.id) };
    });
  });

  return webhookRoutes(publicRoutes(refundRoutes(router, deps), deps, adapters), deps);
}
