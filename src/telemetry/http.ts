import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { Middleware } from 'koa';
import { routeTemplate } from '../http/request-log';
import { tracer, tracing } from './tracing';

/**
 * A server span per request, named by the route template (`POST /v1/checkout/sessions`), the
 * parent of everything the request does. Always a new trace: a `traceparent` from the internet is
 * not ours to join (nor to decide our sampling). Nothing at all while tracing is off.
 */
export const traceRequests: Middleware = async (ctx, next) => {
  if (!tracing().enabled) return next();
  const span = tracer().startSpan(ctx.method, {
    kind: SpanKind.SERVER,
    root: true,
    attributes: { 'http.request.method': ctx.method },
  });
  try {
    await context.with(trace.setSpan(context.active(), span), next);
  } catch (err) {
    span.recordException(err instanceof Error ? err : String(err));
    span.setStatus({ code: SpanStatusCode.ERROR });
    throw err;
  } finally {
    const route = routeTemplate(ctx);
    span.updateName(`${ctx.method} ${route}`);
    span.setAttributes({ 'http.route': route, 'http.response.status_code': ctx.status });
    if (ctx.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
  }
};
