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
import type { WorkflowClientInterceptor } from '@temporalio/client';
import type { ActivityInboundCallsInterceptor, WorkerOptions } from '@temporalio/worker';
import { tracing } from './tracing';

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
    sinks: { exporter: makeWorkflowExporter(spanProcessor, resource) },
  };
}
