/**
 * OpenTelemetry tracing (the OTel JS 2.x line; docs/runtime.md says why not 3.x yet). On only when an OTLP
 * endpoint is configured (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`):
 * then spans go out over OTLP/HTTP in batches, sampled by the standard `OTEL_TRACES_SAMPLER` and
 * `OTEL_TRACES_SAMPLER_ARG` (default parent-based, always on). Off, nothing is registered: the
 * OpenTelemetry API stays its no-op self and no span is made.
 */
import { context, trace, TraceFlags } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { emptyResource, resourceFromAttributes, type Resource } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  NoopSpanProcessor,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';

/** The tracing of this process, as the worker's workflow span sink needs it. */
export interface Tracing {
  enabled: boolean;
  resource: Resource;
  spanProcessor: SpanProcessor;
  /** Sends the spans still buffered and stops. */
  shutdown(): Promise<void>;
}

const off: Tracing = {
  enabled: false,
  resource: emptyResource(),
  spanProcessor: new NoopSpanProcessor(),
  shutdown: async () => undefined,
};
let current: Tracing = off;

/** True when the environment names an OTLP endpoint (and has not turned the SDK off). */
export function tracingConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.OTEL_SDK_DISABLED === 'true' || env.OTEL_TRACES_EXPORTER === 'none') return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

/** The instrumentation's patch factories, each of which opens a span: a statement, a client's and a pool's connect. */
const PG_PATCHES = ['_getClientQueryPatch', '_getClientConnectPatch', '_getPoolConnectPatch'] as const;
type PgMethod = (this: unknown, ...args: unknown[]) => unknown;

/** True when the active span is kept: a local span recording, or a remote parent (a row's traceparent) sampled. */
function sampledParent(): boolean {
  const span = trace.getSpan(context.active());
  return span !== undefined && (span.isRecording() || (span.spanContext().traceFlags & TraceFlags.SAMPLED) !== 0);
}

/**
 * The Postgres statements as child spans of whatever span runs them (never a root span of their
 * own: the relays' polls would be most of the traces), and only of a sampled one: under an unsampled
 * parent `requireParentSpan` alone still builds each statement's attributes, a non-recording span
 * and a context-bound callback (the largest share of the worker's tracing CPU in bench:webhooks). Import
 * `./instrument` before anything loads `pg` so that this can patch it.
 */
export function pgInstrumentation(): PgInstrumentation {
  const instrumentation = new PgInstrumentation({ requireParentSpan: true });
  // The patches are made when `pg` is loaded (after this): each calls pg's own method unless a sampled span is active.
  const patches = instrumentation as unknown as Record<
    (typeof PG_PATCHES)[number],
    () => (original: PgMethod) => PgMethod
  >;
  for (const name of PG_PATCHES) {
    const patchOf = patches[name].bind(instrumentation);
    patches[name] = () => {
      const patch = patchOf();
      return (original) => {
        const traced = patch(original);
        return function (this: unknown, ...args: unknown[]) {
          return (sampledParent() ? traced : original).apply(this, args);
        };
      };
    };
  }
  return instrumentation;
}

let instrumented = false;
/** Patches `pg` (once per process) when tracing is configured; a no-op otherwise. */
export function instrumentLibraries(env: NodeJS.ProcessEnv = process.env): void {
  if (instrumented || !tracingConfigured(env)) return;
  instrumented = true;
  registerInstrumentations({ instrumentations: [pgInstrumentation()] });
}

/**
 * Starts tracing for the service `service` (its `service.name` unless OTEL_SERVICE_NAME says
 * otherwise) when configured, or always with `exporter` (tests). Once per process.
 */
export function startTracing(service: string, opts: { exporter?: SpanExporter } = {}): Tracing {
  if (current.enabled) return current;
  if (!opts.exporter && !tracingConfigured()) return off;
  const resource = resourceFromAttributes({ 'service.name': process.env.OTEL_SERVICE_NAME || service });
  const spanProcessor = new BatchSpanProcessor(opts.exporter ?? new OTLPTraceExporter());
  const provider = new NodeTracerProvider({ resource, spanProcessors: [spanProcessor] });
  provider.register();
  instrumentLibraries();
  current = {
    enabled: true,
    resource,
    spanProcessor,
    shutdown: async () => {
      await provider.shutdown();
      trace.disable();
      current = off;
    },
  };
  return current;
}

/** The tracing started in this process, or the `off` one. */
export function tracing(): Tracing {
  return current;
}

/** Our tracer (a no-op one while tracing is off). */
export const tracer = () => trace.getTracer('svc');
