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
import type { WorkflowClientInterceptor } from '@temporalio/client';
import type { WorkerOptions } from '@temporalio/worker';
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
              inbound: new OpenTelemetryActivityInboundInterceptor(ctx),
              outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
            }),
          ]
        : [],
    },
    sinks: { exporter: makeWorkflowExporter(spanProcessor, resource) },
  };
}
