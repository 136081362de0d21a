/**
 * Workflow interceptor module (not a workflow): the Temporal SDK's OpenTelemetry interceptors, only
 * for a run whose start carried a trace (the `_tracer-data` header a tracing client adds).
 *
 * Why not always: the SDK's interceptors add a yield before each activity, timer-racing signal and
 * child start unless the run's history holds the SDK flag that removes it, and runs recorded
 * without the interceptors hold no such flag, so replaying them with the interceptors reorders
 * their commands (a timer and an activity started together: nondeterminism). Whether a run is
 * traced is read from its own start event, so every replay decides the same way; a run started
 * traced records the flag on its first task and never yields.
 */
import { TRACE_HEADER } from '@temporalio/interceptors-opentelemetry/lib/instrumentation';
import {
  OpenTelemetryInboundInterceptor,
  OpenTelemetryInternalsInterceptor,
  OpenTelemetryOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry/lib/workflow';
import type {
  WorkflowInboundCallsInterceptor,
  WorkflowInterceptors,
  WorkflowOutboundCallsInterceptor,
} from '@temporalio/workflow';

/** The interceptors of one workflow run (the SDK calls this once per run). */
export const interceptors = (): WorkflowInterceptors => {
  let inbound: OpenTelemetryInboundInterceptor | undefined;
  let outbound: OpenTelemetryOutboundInterceptor | undefined;
  const traced: WorkflowInboundCallsInterceptor = {
    execute(input, next) {
      if (input.headers[TRACE_HEADER] === undefined) return next(input);
      inbound = new OpenTelemetryInboundInterceptor();
      outbound = new OpenTelemetryOutboundInterceptor();
      return inbound.execute(input, next);
    },
    handleSignal: (input, next) => (inbound ? inbound.handleSignal(input, next) : next(input)),
  };
  const out: WorkflowOutboundCallsInterceptor = {
    scheduleActivity: (input, next) => (outbound ? outbound.scheduleActivity(input, next) : next(input)),
    scheduleLocalActivity: (input, next) => (outbound ? outbound.scheduleLocalActivity(input, next) : next(input)),
    startChildWorkflowExecution: (input, next) =>
      outbound ? outbound.startChildWorkflowExecution(input, next) : next(input),
    continueAsNew: (input, next) => (outbound ? outbound.continueAsNew(input, next) : next(input)),
    signalWorkflow: (input, next) => (outbound ? outbound.signalWorkflow(input, next) : next(input)),
    getLogAttributes: (input, next) => (outbound ? outbound.getLogAttributes(input, next) : next(input)),
  };
  return { inbound: [traced], outbound: [out], internals: [new OpenTelemetryInternalsInterceptor()] };
};
