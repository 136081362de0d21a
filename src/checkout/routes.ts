import Router from '@koa/router';
import type { AppDeps } from '../app';
import { secretKeyAuth } from '../http/checkout-auth';
import { rateLimit } from '../http/rate-limit';
import { listMerchantMethods } from './payment-methods';
import { paymentMethodOut } from './serializers';

/** The Checkout API under `/v1`. */
export function checkoutRouter(deps: AppDeps): Router {
  const router = new Router({ prefix: '/v1' });
  const perKey = rateLimit(
    deps.db,
    deps.clock,
    { limit: deps.settings.CHECKOUT_RATE_LIMIT_PER_SECOND, windowSeconds: 1 },
    (ctx) => `checkout:${ctx.state.checkout.keyId}`,
  );

  router.get('/payment_methods', secretKeyAuth(deps.db, 'sessions:read'), perKey, async (ctx) => {
    const { merchantId, mode } = ctx.state.checkout;
    const methods = await listMerchantMethods(deps.db, merchantId, mode);
    ctx.body = { data: methods.map(paymentMethodOut) };
  });

  return router;
}
