import type Router from '@koa/router';
import type { AppDeps } from '../deps';
import { secretKeyAuth } from '../http/checkout-auth';
import { renderCheckoutError } from '../http/error-envelope';
import { ApiError } from '../http/errors';
import { checkoutIdempotency } from '../http/idempotency';
import { input, validate } from '../http/validate';
import type { CheckoutScope } from '../keys/scopes';
import { checkoutCursor, listOut } from './cursor';
import { createRefund } from './refunds/create-refund';
import { getRefund, listRefunds } from './refunds/queries';
import { refundOut } from './refunds/refund-row';
import { refundIn, refundListQuery } from './schemas';
import type { SessionDeps } from './sessions/deps';

/** Adds the refund routes (`refunds:write` / `refunds:read`, secret key) to the `/v1` router. */
export function refundRoutes(router: Router, deps: AppDeps): Router {
  const { db, clock, settings } = deps;
  const services: SessionDeps = {
    db,
    clock,
    temporal: deps.temporal,
    taskQueue: settings.TEMPORAL_TASK_QUEUE,
    publicBaseUrl: settings.PUBLIC_BASE_URL,
    beforeHandoff: deps.beforeHandoff,
  };
  const keyAuth = secretKeyAuth(db, clock, settings.CHECKOUT_RATE_LIMIT_PER_SECOND);
  const merchant = (scope: CheckoutScope) => [keyAuth(scope)];
  const create = { body: refundIn };
  const list = { query: refundListQuery };

  router.post(
    '/refunds',
    ...merchant('refunds:write'),
    checkoutIdempotency(db, clock, 'POST /refunds', renderCheckoutError),
    validate(create),
    async (ctx) => {
      const refund = await createRefund(
        services,
        ctx.state.checkout,
        input(ctx, create).body,
        ctx.get('idempotency-key'),
      );
      ctx.status = 201;
      ctx.body = refundOut(refund);
    },
  );

  router.get('/refunds', ...merchant('refunds:read'), validate(list), async (ctx) => {
    const q = input(ctx, list).query;
    const page = await listRefunds(db, ctx.state.checkout, {
      sessionId: q.session_id,
      after: checkoutCursor('refunds', q.cursor),
      limit: q.limit,
    });
    ctx.body = listOut('refunds', page, refundOut);
  });

  router.get('/refunds/:id', ...merchant('refunds:read'), async (ctx) => {
    const refund = await getRefund(db, ctx.state.checkout, ctx.params.id);
    if (!refund) throw ApiError.notFound('refund_not_found', 'No such refund.');
    ctx.body = refundOut(refund);
  });

  return router;
}
