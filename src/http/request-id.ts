import type { Middleware } from 'koa';
import { randomString } from '../lib/ids';

declare module 'koa' {
  interface DefaultState {
    requestId: string;
  }
}

const CHECKOUT_REQUEST_ID = /^[A-Za-z0-9_-]{8,64}$/;

/** A generated request id. */
export const newRequestId = () => `req_${randomString(24)}`;

/** Partner: any `X-Request-Id` sent is used as the request id (echoed as `error.request_id`). */
export const partnerRequestId: Middleware = async (ctx, next) => {
  const sent = ctx.get('x-request-id');
  ctx.state.requestId = sent !== '' && sent.length <= 200 ? sent : newRequestId();
  ctx.set('X-Request-Id', ctx.state.requestId);
  return next();
};

/** Checkout: a valid `x-request-id` (8–64 of A-Za-z0-9_-) is used, else `req_…`; always echoed. */
export const checkoutRequestId: Middleware = async (ctx, next) => {
  const sent = ctx.get('x-request-id');
  ctx.state.requestId = CHECKOUT_REQUEST_ID.test(sent) ? sent : newRequestId();
  ctx.set('x-request-id', ctx.state.requestId);
  return next();
};
