/**
 * The Temporal SDK's OpenTelemetry interceptors: a start or signal carries the caller's trace in the
 * `_tracer-data` header, the workflow's task and its activities continue it.
 */
import {
  makeWorkflowExporter,
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
  OpenTelemetryWorkflowClientInterceptor,
} from '@temporalio/interceptors-opentelemetry';
import { TRACE_HEADER } from '@temporalio/interceptors-opentelemetry/lib/instrumentation';
import type { Resource } from '@opentelemetry/resources';
import type { ReadableSpan, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { WorkflowClientInterceptor } from '@temporalio/client';
import type { ActivityInboundCallsInterceptor, WorkerOptions } from '@temporalio/worker';
import { tracing } from './tracing';

/** The span processor, span and resource types of the SDK's interceptors: OpenTelemetry 1.x's, which they are built on. */
type SdkSpanProcessor = Parameters<typeof makeWorkflowExporter>[0];
type SdkSpan = Parameters<SdkSpanProcessor['onEnd']>[0];
type SdkResource = Parameters<typeof makeWorkflowExporter>[1];

/**
 * A workflow span as our OpenTelemetry 2.x SDK reads it: the SDK's sink hands the spans over in the
 * 1.x shape, with `parentSpanId` and `instrumentationLibrary` where 2.x reads `parentSpanContext`
 * and `instrumentationScope` (without them the exported span has no parent and no scope).
 */
export function fromWorkflowSpan(span: SdkSpan, resource: Resource): ReadableSpan {
  const { parentSpanId, instrumentationLibrary, resource: _sdkResource, ...rest } = span;
  const { traceId, traceFlags } = span.spanContext();
  return {
    ...rest,
    resource,
    parentSpanContext: parentSpanId ? { traceId, spanId: parentSpanId, traceFlags } : undefined,
    instrumentationScope: instrumentationLibrary,
  };
}

/** The SDK's workflow span sink, its spans converted for `processor` (which the tracing's provider shuts down). */
function workflowSpanSink(processor: SpanProcessor, resource: Resource) {
  const adapter: SdkSpanProcessor = {
    onStart: () => undefined,
    onEnd: (span) => processor.onEnd(fromWorkflowSpan(span, resource)),
    forceFlush: () => processor.forceFlush(),
    shutdown: async () => undefined,
  };
  // The sink only attaches the resource to each span, which fromWorkflowSpan replaces with `resource` itself.
  return makeWorkflowExporter(adapter, resource as unknown as SdkResource);
}

/**
 * The workflow interceptor modules every workflow bundle includes, tracing on or off, so the
 * workflow code (and every replay) is the same either way: they trace only the runs whose start
 * carried a trace (workflows/interceptors.ts says why), whose spans leave through the sink below.
 */
export const workflowInterceptorModules: string[] = [require.resolve('../../workflows/interceptors')];

/** Client interceptors that put the active trace into each start and signal (none while tracing is off). */
export function temporalClientInterceptors(): { workflow: WorkflowClientInterceptor[] } {
  return { workflow: tracing().enabled ? [new OpenTelemetryWorkflowClientInterceptor()] : [] };
}

/**
 * The SDK's activity span, only for an activity whose workflow is traced (its schedule carried the
 * `_tracer-data` header), as the workflow side decides: otherwise the SDK makes each activity of an
 * untraced run (a webhook endpoint's `deliverDue`, the janitor's) a root span, sampled like a new
 * request, with every statement it runs (the relays' polls, which `requireParentSpan` keeps out).
 */
function tracedActivitiesOnly(traced: OpenTelemetryActivityInboundInterceptor): ActivityInboundCallsInterceptor {
  return {
    execute: (input, next) => (input.headers[TRACE_HEADER] === undefined ? next(input) : traced.execute(input, next)),
  };
}

/**
 * What a worker adds for tracing: the activity interceptors (while tracing is on), the workflow
 * interceptor modules (ignored by the SDK for a prebuilt bundle, which has them already) and the
 * sink the workflows' spans leave the sandbox through.
 */
export function workerTracingOptions(): Pick<WorkerOptions, 'interceptors' | 'sinks'> {
  const { enabled, spanProcessor, resource } = tracing();
  return {
    interceptors: {
      workflowModules: workflowInterceptorModules,
      activity: enabled
        ? [
            (ctx) => ({
              inbound: tracedActivitiesOnly(new OpenTelemetryActivityInboundInterceptor(ctx)),
              outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
            }),
          ]
        : [],
    },
    sinks: { exporter: workflowSpanSink(spanProcessor, resource) },
  };
}
