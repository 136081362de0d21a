import {
  type Context,
  context,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  trace,
  TraceFlags,
} from '@opentelemetry/api';
import { tracer } from './tracing';

/**
 * The active trace as a W3C `traceparent`, to store in a row written in this transaction (a
 * handoff, an event, an outbox message), or null when there is none (tracing off).
 */
export function currentTraceparent(): string | null {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier.traceparent ?? null;
}

/**
 * Whether a span under `parent` would be kept: with parent-based sampling (the default, and what
 * production runs), a child of an unsampled parent is never sampled, so making it is wasted work.
 */
function sampled(parent: Context): boolean {
  return ((trace.getSpanContext(parent)?.traceFlags ?? TraceFlags.NONE) & TraceFlags.SAMPLED) !== 0;
}

/**
 * Records a finished span `name` (from `startTime` to now) in the trace stored in a row, for a
 * step done for many rows at once (the dispatcher's fan-out); nothing when the row has no trace.
 */
export function recordInStoredTrace(
  traceparent: string | null | undefined,
  name: string,
  startTime: number,
  attributes: Record<string, string | number>,
): void {
  if (!traceparent) return;
  const parent = propagation.extract(ROOT_CONTEXT, { traceparent });
  if (!sampled(parent)) return; // a span that would not be kept
  tracer().startSpan(name, { kind: SpanKind.CONSUMER, startTime, attributes }, parent).end();
}

/**
 * Runs `fn` in a span `name` of the trace stored in a row (`traceparent`), so what it does joins
 * the trace of whoever wrote the row; a new trace when the row has none.
 */
export function inStoredTrace<T>(
  traceparent: string | null | undefined,
  name: string,
  attributes: Record<string, string | number>,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  const parent = traceparent ? propagation.extract(ROOT_CONTEXT, { traceparent }) : ROOT_CONTEXT;
  const stored = trace.getSpan(parent);
  // Unsampled: no span of ours (it would not be kept), but what runs still logs the stored trace id.
  if (stored && !sampled(parent)) return context.with(parent, () => fn(stored));
  return tracer().startActiveSpan(name, { kind: SpanKind.CONSUMER, attributes }, parent, async (span) => {
    try {
      return await fn(span);
    } finally {
      span.end();
    }
  });
}
