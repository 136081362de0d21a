import { context, ROOT_CONTEXT, trace, TraceFlags, type Tracer } from '@opentelemetry/api';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import type { Context as ActivityContext } from '@temporalio/activity';
import { defaultPayloadConverter } from '@temporalio/common';
import { TRACE_HEADER } from '@temporalio/interceptors-opentelemetry/lib/instrumentation';
import type { ActivityExecuteInput } from '@temporalio/worker';
import { inStoredTrace, recordInStoredTrace } from '../../src/telemetry/propagation';
import { workerTracingOptions } from '../../src/telemetry/temporal';
import { pgInstrumentation, startTracing, type Tracing } from '../../src/telemetry/tracing';

/**
 * Tracing costs nothing where no trace is kept: a statement under an unsampled span makes no span
 * (not even a non-recording one), an activity of an untraced workflow starts no trace of its own,
 * and a row's unsampled trace gets no span of ours; a sampled parent still gets all of them.
 */
const exporter = new InMemorySpanExporter();
let tracing: Tracing;
const pg = require('pg');
const instrumentation = pgInstrumentation();
let client: { connect(): Promise<void>; query(text: string): Promise<unknown>; end(): Promise<void> };

beforeAll(async () => {
  tracing = startTracing('svc-test', { exporter });
  // Jest's loader bypasses the instrumentation's require hook: patch this file's `pg` as it would.
  for (const m of instrumentation.getModuleDefinitions())
    if (m.name === 'pg') m.patch?.(pg, require('pg/package.json').version);
  client = new pg.Client({ connectionString: process.env.DATABASE_URL });
  await client.connect(); // outside any span
});
afterAll(async () => {
  await client.end();
  for (const m of instrumentation.getModuleDefinitions()) if (m.name === 'pg') m.unpatch?.(pg);
  await tracing.shutdown();
});

const exported = async () => {
  await tracing.spanProcessor.forceFlush();
  return exporter.getFinishedSpans();
};
/** A remote parent with `flags` (sampled or not), as a row's traceparent or a workflow header gives it. */
const parent = (flags: TraceFlags) =>
  trace.setSpanContext(ROOT_CONTEXT, {
    traceId: '0af7651916cd43dd8448eb211c80319c',
    spanId: 'b7ad6b7169203331',
    traceFlags: flags,
    isRemote: true,
  });

it('runs a statement under an unsampled span without making a span for it, and traces it under a sampled one', async () => {
  const tracer = (instrumentation as unknown as { tracer: Tracer }).tracer;
  const startSpan = jest.spyOn(tracer, 'startSpan');
  exporter.reset();
  await context.with(parent(TraceFlags.NONE), () => client.query('SELECT 1 AS unsampled'));
  expect(startSpan).not.toHaveBeenCalled();
  await context.with(parent(TraceFlags.SAMPLED), () => client.query('SELECT 1 AS sampled'));
  expect(startSpan).toHaveBeenCalledTimes(1);
  const spans = await exported();
  expect(spans.map((s) => s.attributes['db.query.text'])).toEqual(['SELECT 1 AS sampled']);
  expect(spans[0].parentSpanContext?.spanId).toBe('b7ad6b7169203331');
  startSpan.mockRestore();
});

it('starts no span for an activity whose workflow is not traced, and continues the trace of one that is', async () => {
  const [factory] = workerTracingOptions().interceptors!.activity!;
  const info = {
    activityType: 'deliverDue',
    activityId: '1',
    inWorkflow: true,
    workflowExecution: { workflowId: 'wf', runId: 'run' },
  };
  const { inbound } = factory({ info } as unknown as ActivityContext);
  const input = (headers: ActivityExecuteInput['headers']) => ({ args: [], headers }) as ActivityExecuteInput;
  const active: Array<string | undefined> = [];
  const next = async () => {
    active.push(trace.getActiveSpan()?.spanContext().traceId);
    return 'done';
  };
  exporter.reset();
  expect(await inbound!.execute!(input({}), next)).toBe('done');
  const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
  const headers = { [TRACE_HEADER]: defaultPayloadConverter.toPayload({ traceparent }) };
  expect(await inbound!.execute!(input(headers), next)).toBe('done');
  expect(active).toEqual([undefined, '0af7651916cd43dd8448eb211c80319c']);
  const spans = await exported();
  expect(spans.map((s) => [s.name, s.parentSpanContext?.spanId])).toEqual([
    ['RunActivity:deliverDue', 'b7ad6b7169203331'],
  ]);
});

it("makes no span of ours in a row's unsampled trace, yet runs in it; a sampled one gets its spans", async () => {
  const unsampled = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00';
  const kept = '00-1bf7651916cd43dd8448eb211c80319c-c7ad6b7169203331-01';
  exporter.reset();
  recordInStoredTrace(unsampled, 'webhook dispatch', Date.now(), {});
  const inside = await inStoredTrace(unsampled, 'webhook delivery', {}, async (span) => ({
    recording: span.isRecording(),
    traceId: trace.getActiveSpan()?.spanContext().traceId, // what a log line inside names
  }));
  expect(inside).toEqual({ recording: false, traceId: '0af7651916cd43dd8448eb211c80319c' });
  expect(await exported()).toEqual([]);
  recordInStoredTrace(kept, 'webhook dispatch', Date.now(), {});
  await inStoredTrace(kept, 'webhook delivery', {}, async (span) => expect(span.isRecording()).toBe(true));
  const spans = await exported();
  expect(spans.map((s) => [s.name, s.spanContext().traceId, s.parentSpanContext?.spanId])).toEqual([
    ['webhook dispatch', '1bf7651916cd43dd8448eb211c80319c', 'c7ad6b7169203331'],
    ['webhook delivery', '1bf7651916cd43dd8448eb211c80319c', 'c7ad6b7169203331'],
  ]);
});
