import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { Middleware } from 'koa';
import { Counter, Gauge, Histogram } from 'prom-client';
import { routeTemplate } from '../http/request-log';
import { registry } from './metrics';
import { tracer, tracing } from './tracing';

/** Which API a path belongs to: the label every HTTP metric carries. */
export type ApiName = 'partner' | 'checkout' | 'public' | 'hosted' | 'console' | 'other';

/** The API of `path`, by its mount point (src/app.ts). */
export function apiOf(path: string): ApiName {
  const under = (prefix: string) => path === prefix || path.startsWith(`${prefix}/`);
  if (under('/partner')) return 'partner';
  if (under('/v1/public')) return 'public';
  if (under('/v1')) return 'checkout';
  if (under('/c') || under('/t') || under('/r') || under('/hosted')) return 'hosted';
  if (under('/console')) return 'console';
  return 'other';
}

const duration = new Histogram({
  name: 'svc_http_request_duration_seconds',
  help: 'HTTP requests by API, method, route template (unmatched: no route) and status class, from arrival to the last header.',
  labelNames: ['api', 'method', 'route', 'status_class'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  registers: [registry],
});

const inFlight = new Gauge({
  name: 'svc_http_requests_in_flight',
  help: 'HTTP requests being served, by API.',
  labelNames: ['api'] as const,
  registers: [registry],
});

/** Requests of a stopping API: answered after its stop signal, or cut (their connection closed unanswered at the bound). */
export const requestsDuringStop = new Counter({
  name: 'svc_http_requests_during_stop_total',
  help: 'Requests a stopping API answered after its stop signal (answered) or closed unanswered at SHUTDOWN_TIMEOUT_MS (cut).',
  labelNames: ['outcome'] as const,
  registers: [registry],
});
for (const outcome of ['answered', 'cut'] as const) requestsDuringStop.inc({ outcome }, 0);

/** Idempotency-Key outcomes other than a first request: replayed answers, conflicts, requests still in progress. */
export const idempotency = new Counter({
  name: 'svc_idempotency_total',
  help: 'Requests with an Idempotency-Key answered from the record (replayed), refused as a conflict, or refused as in progress.',
  labelNames: ['api', 'outcome'] as const,
  registers: [registry],
});

/** Requests answered 503 service_unavailable because a dependency passed its deadline or was unreachable. */
export const dependencyUnavailableTotal = new Counter({
  name: 'svc_http_dependency_unavailable_total',
  help: 'Requests answered 503 service_unavailable because a dependency (postgres|temporal) passed its deadline or was unreachable, by API.',
  labelNames: ['api', 'dependency'] as const,
  registers: [registry],
});
for (const api of ['partner', 'checkout', 'public', 'hosted'] as const)
  for (const dependency of ['postgres', 'temporal'] as const) dependencyUnavailableTotal.inc({ api, dependency }, 0);

const rateLimited = new Counter({
  name: 'svc_rate_limited_total',
  help: 'Requests refused with 429, by API and rate-limit policy (the RateLimit-Policy name; other when none).',
  labelNames: ['api', 'policy'] as const,
  registers: [registry],
});

/** The policy name of a `RateLimit-Policy` field (`"checkout";q=100;w=1`); `other` when there is none. */
const policyOf = (field: string) => /^"([a-z0-9_-]{1,40})"/.exec(field)?.[1] ?? 'other';

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * Times every request under its router's route template (`ctx._matchedRoute`, never the raw path,
 * so ids never become labels); the outermost middleware, so errors rendered below it are counted
 * with their final status.
 */
export const httpMetrics: Middleware = async (ctx, next) => {
  const api = apiOf(ctx.path);
  const stop = duration.startTimer();
  inFlight.inc({ api });
  let status = 500; // an error escaping every handler becomes Koa's 500
  try {
    await next();
    status = ctx.status;
  } finally {
    inFlight.dec({ api });
    const route = routeTemplate(ctx);
    const method = METHODS.has(ctx.method) ? ctx.method : 'other';
    stop({ api, method, route, status_class: `${Math.floor(status / 100)}xx` });
    if (status === 429) rateLimited.inc({ api, policy: policyOf(ctx.response.get('RateLimit-Policy')) });
  }
};

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
