import { trace } from '@opentelemetry/api';
import type { Context, Middleware } from 'koa';
import { ZodError } from 'zod';
import { log } from '../lib/log';
import { ApiError, BodyError } from './errors';
import { routeTemplate } from './request-log';
import { dependencyUnavailable } from './unavailable';
import { zodDetails } from './validate';

type Envelope = (ctx: Context, err: ApiError) => unknown;

/** Partner envelope: `details` only when there are some. */
const partnerEnvelope: Envelope = (ctx, err) => ({
  error: {
    code: err.code,
    message: err.message,
    ...(err.details.length > 0 ? { details: err.details } : {}),
    request_id: ctx.state.requestId,
  },
});

/** Checkout envelope: `details` always present, each entry with a field (`(body)` for the whole body). */
const checkoutEnvelope: Envelope = (ctx, err) => ({
  error: {
    code: err.code,
    message: err.message,
    details: err.details.map((d) => ({ field: d.field ?? '(body)', issue: d.issue })),
    request_id: ctx.state.requestId,
  },
});

/**
 * Turns any thrown error into a known ApiError: a dependency past its deadline or unreachable into
 * a logged and counted 503 with Retry-After, unknown ones into a logged bare 500.
 */
export function toApiError(ctx: Context, err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof ZodError) return ApiError.validation('The request is invalid.', zodDetails(err));
  if (dependencyUnavailable(ctx, err)) return ApiError.serviceUnavailable();
  log.error('unhandled error', { method: ctx.method, route: routeTemplate(ctx), error: err });
  // The stack goes to the trace (never to the log or the response).
  trace.getActiveSpan()?.recordException(err instanceof Error ? err : String(err));
  return ApiError.internal();
}

function renderer(envelope: Envelope, bodyErrorsAsEnvelope: boolean) {
  return (ctx: Context, err: unknown): void => {
    if (err instanceof BodyError && !bodyErrorsAsEnvelope) {
      ctx.status = err.status;
      ctx.body = { message: err.message, type: err.type };
      return;
    }
    const apiError = err instanceof BodyError ? bodyErrorAsApiError(err) : toApiError(ctx, err);
    ctx.status = apiError.status;
    ctx.set(apiError.headers);
    ctx.body = envelope(ctx, apiError);
  };
}

function bodyErrorAsApiError(err: BodyError): ApiError {
  return err.status === 413
    ? new ApiError(413, 'request_too_large', 'The request body is over the size limit.', [{ issue: 'too_large' }])
    : ApiError.validation('The body is not valid JSON.', [{ issue: 'invalid_json' }]);
}

function errorMiddleware(render: (ctx: Context, err: unknown) => void): Middleware {
  return async (ctx, next) => {
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        throw ApiError.notFound('not_found', `No route for ${ctx.method} ${ctx.path}.`);
      }
      // The router answers 405 for a method the path lacks and 501 for one no route has (TRACE):
      // both are the client's mistake, a 405 with the router's Allow header (a 404 when nothing matched).
      if (ctx.status === 405 || ctx.status === 501) {
        if (ctx.response.get('Allow') === '')
          throw ApiError.notFound('not_found', `No route for ${ctx.method} ${ctx.path}.`);
        throw new ApiError(405, 'method_not_allowed', `${ctx.method} is not allowed on ${ctx.path}.`);
      }
    } catch (err) {
      render(ctx, err);
    }
  };
}

/** Renders any error in the Partner envelope; malformed and over-size bodies in the framework shape. */
export const renderPartnerError = renderer(partnerEnvelope, false);

/** Renders any error in the Checkout envelope, malformed and over-size bodies included. */
export const renderCheckoutError = renderer(checkoutEnvelope, true);

/** Partner API error middleware. */
export const partnerErrors = errorMiddleware(renderPartnerError);

/** Checkout API error middleware. */
export const checkoutErrors = errorMiddleware(renderCheckoutError);
