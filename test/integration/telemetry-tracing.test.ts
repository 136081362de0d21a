import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { Client } from '@temporalio/client';
import type { WorkflowClientInterceptor } from '@temporalio/client';
import { createApp } from '../../src/app';
import { startHandoffRelay } from '../../src/temporal/handoff-relay';
import { temporalClientInterceptors } from '../../src/telemetry/temporal';
import { pgInstrumentation, startTracing, type Tracing } from '../../src/telemetry/tracing';
import { createSession, MINUTE, SECOND, sessionBody } from '../helpers/checkout-payments';
import { HttpsReceiver, RECEIVER_HOST, startHttpsReceiver } from '../helpers/https-receiver';
import { keepHistory } from '../helpers/histories';
import { listen, startStack, Stack } from '../helpers/stack';
import { until, webhookSteps } from '../helpers/webhooks';

/**
 * One trace through Temporal, collected by a real OTLP/HTTP receiver: a session create (its HTTP
 * span, its SQL, the workflow start) continues in the workflow's task, its expiry activity and the
 * webhook POST of `checkout.session.expired` that the expiry causes (through the event row's
 * stored trace); a handoff the relay delivers after a refused fast path stays in its request's
 * trace. The merchant's endpoint never sees a trace header.
 */

/** One span as the collector received it (OTLP JSON encoding). */
interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  service: string;
  attributes: Record<string, unknown>;
}

/** A loopback OTLP/HTTP trace receiver: POST /v1/traces with the JSON encoding the exporter sends. */
async function startOtlpReceiver() {
  const spans: ReceivedSpan[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      for (const rs of body.resourceSpans ?? []) {
        const service = rs.resource?.attributes?.find((a: any) => a.key === 'service.name')?.value?.stringValue;
        for (const ss of rs.scopeSpans ?? [])
          for (const s of ss.spans ?? [])
            spans.push({
              traceId: s.traceId,
              spanId: s.spanId,
              parentSpanId: s.parentSpanId || undefined,
              name: s.name,
              service,
              attributes: Object.fromEntries(
                (s.attributes ?? []).map((a: any) => [a.key, Object.values(a.value ?? {})[0]]),
              ),
            });
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`;
  return { url, spans, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

let collector: Awaited<ReturnType<typeof startOtlpReceiver>>;
let tracing: Tracing;
let receiver: HttpsReceiver;
let stack: Stack;
const { webhookMerchant, createEndpoint } = webhookSteps(() => stack);

beforeAll(async () => {
  collector = await startOtlpReceiver();
  // Before the stack: its worker then runs the activity interceptors and the workflow span sink.
  tracing = startTracing('svc-test', { exporter: new OTLPTraceExporter({ url: collector.url }) });
  // Jest loads modules through its own loader, which the instrumentation's require hook never sees:
  // patch this file's `pg` as the hook would have.
  const pg = require('pg');
  for (const m of pgInstrumentation().getModuleDefinitions())
    if (m.name === 'pg') m.patch?.(pg, require('pg/package.json').version);
  receiver = await startHttpsReceiver();
  stack = await startStack({ WEBHOOK_ALLOWED_HOSTS: RECEIVER_HOST, WEBHOOK_EXTRA_CA_PATH: receiver.caPath });
});
afterAll(async () => {
  await stack.stop();
  await receiver.close();
  await tracing.shutdown();
  await collector.close();
});

/** A Temporal client on the stack's server that carries the active trace (as the API's does). */
const tracedClient = (extra: WorkflowClientInterceptor[] = []) =>
  new Client({
    connection: stack.env.connection,
    namespace: stack.env.namespace ?? 'default',
    interceptors: { workflow: [...temporalClientInterceptors().workflow, ...extra] },
  });

/** Creates a session expiring in 30 minutes through `api` (201 expected). */
const createExpiring = (api: { baseUrl: string }, secretKey: string) =>
  createSession(
    api,
    secretKey,
    sessionBody({ expires_at: new Date(stack.clock().getTime() + 30 * MINUTE).toISOString() }),
  );

/** The spans of `traceId` the collector has, once `names` are all among them (flushing meanwhile). */
async function traceWith(traceId: string, names: string[]): Promise<ReceivedSpan[]> {
  const inTrace = () => collector.spans.filter((s) => s.traceId === traceId);
  await until(
    async () => {
      await tracing.spanProcessor.forceFlush();
      return inTrace().map((s) => s.name);
    },
    (have) => names.every((n) => have.includes(n)),
    `spans ${names.join(', ')} in one trace`,
    30_000,
  );
  return inTrace();
}

/** The server span of the request that created `sessionId` (found through its workflow start span). */
async function createSpanOf(sessionId: string): Promise<ReceivedSpan> {
  let found: ReceivedSpan | undefined;
  await until(
    async () => {
      await tracing.spanProcessor.forceFlush();
      const start = collector.spans.find(
        (s) => s.name === 'StartWorkflow:sessionWorkflow' && s.attributes.temporalWorkflowId === sessionId,
      );
      found = collector.spans.find((s) => s.name === 'POST /v1/checkout/sessions' && s.traceId === start?.traceId);
      return found;
    },
    Boolean,
    'the create request span',
  );
  return found!;
}

it('joins the create request, its SQL, the workflow start and task, the expiry activity and the webhook POST in one trace', async () => {
  const m = await webhookMerchant();
  const endpoint = await createEndpoint(m.secretKey, receiver.url('/traced'), {
    events: ['checkout.session.expired'],
  });
  expect(endpoint.id).toMatch(/^we_/);
  const api = await listen(createApp({ ...stack.deps, temporal: tracedClient() }));
  let sessionId: string;
  try {
    sessionId = (await createExpiring(api, m.secretKey)).id;
  } finally {
    await api.close();
  }
  await stack.env.sleep(30 * MINUTE + SECOND); // the expiry timer fires
  expect(await stack.env.client.workflow.getHandle(sessionId).result()).toBe('expired');
  const [delivered] = await receiver.waitFor(1, '/traced');
  expect(JSON.parse(delivered.body)).toMatchObject({ type: 'checkout.session.expired' });
  // Our trace headers are ours: none reaches the merchant's endpoint.
  for (const header of ['traceparent', 'tracestate', 'baggage', 'b3', 'x-b3-traceid', 'uber-trace-id'])
    expect(delivered.headers[header]).toBeUndefined();

  const create = await createSpanOf(sessionId);
  const spans = await traceWith(create.traceId, [
    'POST /v1/checkout/sessions',
    'StartWorkflow:sessionWorkflow',
    'RunWorkflow:sessionWorkflow',
    'StartActivity:expireSession',
    'RunActivity:expireSession',
    'webhook dispatch',
    'webhook delivery',
    'webhook POST',
  ]);
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  const parentOf = (name: string) => byId.get(spans.find((s) => s.name === name)!.parentSpanId!)?.name;
  expect(create.parentSpanId).toBeUndefined(); // the request starts the trace
  expect(create.attributes).toMatchObject({ 'http.route': '/v1/checkout/sessions', 'http.response.status_code': 201 });
  // The create's SQL is under its request span.
  const sql = spans.filter((s) => s.attributes['db.system.name'] === 'postgresql');
  expect(sql.length).toBeGreaterThan(0);
  expect(sql.some((s) => s.parentSpanId === create.spanId)).toBe(true);
  expect(parentOf('StartWorkflow:sessionWorkflow')).toBe('POST /v1/checkout/sessions');
  expect(parentOf('RunWorkflow:sessionWorkflow')).toBe('StartWorkflow:sessionWorkflow');
  expect(parentOf('StartActivity:expireSession')).toBe('RunWorkflow:sessionWorkflow');
  expect(parentOf('RunActivity:expireSession')).toBe('StartActivity:expireSession');
  // The expiry activity's own SQL, then the delivery of the event it recorded, after the commit.
  const expiry = spans.find((s) => s.name === 'RunActivity:expireSession')!;
  expect(sql.some((s) => s.parentSpanId === expiry.spanId)).toBe(true);
  expect(parentOf('webhook dispatch')).toBe('RunActivity:expireSession');
  expect(parentOf('webhook delivery')).toBe('RunActivity:expireSession');
  expect(parentOf('webhook POST')).toBe('webhook delivery');
  expect(spans.find((s) => s.name === 'webhook POST')!.attributes).toMatchObject({
    'http.request.method': 'POST',
    'server.address': RECEIVER_HOST,
    'http.response.status_code': 200,
  });

  // A history recorded with tracing on (`_tracer-data` headers, the interceptors' SDK flags).
  await keepHistory(stack, sessionId, 'session/expired-traced');
});

it('keeps a handoff the relay delivers after the commit in its request trace', async () => {
  const m = await webhookMerchant();
  const refuse = () => Promise.reject(new Error('14 UNAVAILABLE: Temporal is down'));
  const refusing: WorkflowClientInterceptor = { startWithDetails: refuse, signal: refuse, signalWithStart: refuse };
  const api = await listen(createApp({ ...stack.deps, temporal: tracedClient([refusing]) }));
  let sessionId: string;
  try {
    // 201 although the fast path was refused: the handoff row waits for the relay.
    sessionId = (await createExpiring(api, m.secretKey)).id;
  } finally {
    await api.close();
  }
  const [row] = await stack.db('workflow_handoffs').where({ workflow_id: sessionId });
  expect(row.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/);
  const traceId = row.traceparent.split('-')[1];

  const relay = startHandoffRelay({
    db: stack.db,
    temporal: tracedClient(),
    taskQueue: stack.taskQueue,
    merchantIds: new Set([m.merchantId]),
    pollEveryMs: 250,
  });
  try {
    await until(
      () => stack.db('workflow_handoffs').where({ workflow_id: sessionId }),
      (rows) => rows.length === 0,
      'the relay to deliver the handoff',
    );
    // The workflow's span ends with the run: let it expire.
    await stack.env.sleep(30 * MINUTE + SECOND);
    expect(await stack.env.client.workflow.getHandle(sessionId).result()).toBe('expired');
    const spans = await traceWith(traceId, [
      'POST /v1/checkout/sessions',
      'handoff relay',
      'StartWorkflow:sessionWorkflow',
      'RunWorkflow:sessionWorkflow',
    ]);
    const byName = (name: string) => spans.filter((s) => s.name === name);
    const [create] = byName('POST /v1/checkout/sessions');
    const [relayed] = byName('handoff relay');
    expect(relayed.parentSpanId).toBe(row.traceparent.split('-')[2]); // the span that wrote the row
    expect(spans.find((s) => s.spanId === relayed.parentSpanId)).toBeDefined();
    expect(create.traceId).toBe(traceId);
    const starts = byName('StartWorkflow:sessionWorkflow').filter((s) => s.parentSpanId === relayed.spanId);
    expect(starts).toHaveLength(1);
    expect(byName('RunWorkflow:sessionWorkflow')[0].parentSpanId).toBe(starts[0].spanId);
  } finally {
    await relay.stop();
  }
});
