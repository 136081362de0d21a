import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomString } from '../../src/lib/ids';
import { freePort } from '../../scripts/processes';
import { payableBody, shopper } from '../helpers/checkout-payments';
import { buildMerchant } from '../helpers/factories';
import { call } from '../helpers/http';
import { startHttpsReceiver, type HttpsReceiver } from '../helpers/https-receiver';
import { startTestDevServer } from '../helpers/stack';
import { ownDatabase, startService, untilStatus, type ServiceProcess } from '../helpers/services';

/**
 * A real Prometheus scrapes a real API and worker (the entry points, as processes, with their
 * metrics servers on loopback ports) every second during a short journey: sessions created and
 * paid, webhooks delivered to a real HTTPS receiver, one endpoint answering 500. The series are
 * then read back through Prometheus's query API, so names, labels and values are what an
 * on-call's dashboards and alerts will see.
 */
const PROMETHEUS = process.env.PROMETHEUS_PATH ?? '/usr/bin/prometheus';
jest.setTimeout(240_000);

let database: Awaited<ReturnType<typeof ownDatabase>>;
let temporal: Awaited<ReturnType<typeof startTestDevServer>>;
let receiver: HttpsReceiver;
let api: ServiceProcess;
let worker: ServiceProcess;
let apiUrl: string;
let prometheus: ChildProcess;
let prometheusUrl: string;
let prometheusDir: string;
let apiMetricsUrl: string;
let workerMetricsUrl: string;

beforeAll(async () => {
  if (!existsSync(PROMETHEUS))
    throw new Error(`No Prometheus at ${PROMETHEUS}: npm test installs it (or set PROMETHEUS_PATH).`);
  [database, temporal, receiver] = await Promise.all([ownDatabase(), startTestDevServer(), startHttpsReceiver()]);
  receiver.respond = (req) => ({ status: req.path === '/fail' ? 500 : 200 });
  const [apiPort, apiMetrics, workerMetrics, sdkMetrics, prometheusPort] = await Promise.all(
    Array.from({ length: 5 }, () => freePort()),
  );
  apiUrl = `http://127.0.0.1:${apiPort}`;
  apiMetricsUrl = `http://127.0.0.1:${apiMetrics}`;
  workerMetricsUrl = `http://127.0.0.1:${workerMetrics}`;
  const env = {
    DATABASE_URL: database.url,
    TEMPORAL_ADDRESS: temporal.address,
    METRICS_HOST: '127.0.0.1',
    WEBHOOK_EXTRA_CA_PATH: receiver.caPath,
    WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
    PUBLIC_BASE_URL: apiUrl,
    LOG_LEVEL: 'warn',
  };
  worker = startService('worker', {
    ...env,
    WORKER_METRICS_PORT: String(workerMetrics),
    TEMPORAL_SDK_METRICS_PORT: String(sdkMetrics),
  });
  api = startService('api', { ...env, HOST: '127.0.0.1', PORT: String(apiPort), METRICS_PORT: String(apiMetrics) });
  await Promise.all([
    untilStatus(`http://127.0.0.1:${apiMetrics}/readyz`, 200),
    untilStatus(`http://127.0.0.1:${workerMetrics}/readyz`, 200),
  ]);

  prometheusDir = mkdtempSync(join(tmpdir(), 'svc-prometheus-'));
  const config = join(prometheusDir, 'prometheus.yml');
  writeFileSync(
    config,
    [
      'global: { scrape_interval: 1s, scrape_timeout: 900ms, evaluation_interval: 1s }',
      'scrape_configs:',
      `  - { job_name: api, static_configs: [{ targets: ['127.0.0.1:${apiMetrics}'] }] }`,
      `  - { job_name: worker, static_configs: [{ targets: ['127.0.0.1:${workerMetrics}'] }] }`,
      '',
    ].join('\n'),
  );
  prometheusUrl = `http://127.0.0.1:${prometheusPort}`;
  prometheus = spawn(
    PROMETHEUS,
    [
      `--config.file=${config}`,
      `--storage.tsdb.path=${join(prometheusDir, 'data')}`,
      `--web.listen-address=127.0.0.1:${prometheusPort}`,
    ],
    { stdio: 'ignore' },
  );
  await untilStatus(`${prometheusUrl}/-/ready`, 200);
}, 240_000);

afterAll(async () => {
  if (prometheus && prometheus.exitCode === null) {
    const exited = new Promise((resolve) => prometheus.once('exit', resolve));
    prometheus.kill('SIGTERM');
    await exited;
  }
  await Promise.all([api?.stop(), worker?.stop()]);
  await Promise.all([receiver?.close(), temporal?.stop(), database?.drop()]);
  if (prometheusDir) rmSync(prometheusDir, { recursive: true, force: true });
});

/** SDK counters whose series the SDK's exporter creates at their first event (none happens in this journey). */
const FIRST_EVENT_ONLY = new Set([
  'temporal_sticky_cache_miss_total',
  'temporal_workflow_task_execution_failed_total',
  'temporal_request_failure_total',
]);

type Sample = { metric: Record<string, string>; value: [number, string] };

/** An instant query through Prometheus's HTTP API. */
async function query(promql: string): Promise<Sample[]> {
  const res = await fetch(`${prometheusUrl}/api/v1/query?query=${encodeURIComponent(promql)}`);
  const body = (await res.json()) as { status: string; data: { result: Sample[] }; error?: string };
  if (body.status !== 'success') throw new Error(`${promql}: ${body.error}`);
  return body.data.result;
}

/** The single value of `promql` once it satisfies `ok` (scrapes come every second); fails with the last value. */
async function eventually(promql: string, ok: (v: number) => boolean, timeoutMs = 30_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let last: Sample[] = [];
  for (;;) {
    last = await query(promql);
    if (last.length === 1 && ok(Number(last[0].value[1]))) return Number(last[0].value[1]);
    if (Date.now() > deadline) {
      throw new Error(
        `${promql} never held; last result ${JSON.stringify(last)}\napi:\n${api.output().slice(-2000)}\nworker:\n${worker.output().slice(-2000)}`,
      );
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** A merchant with an endpoint at `path` on the receiver, its sessions created and paid (cash on delivery). */
async function payingMerchant(path: string, sessions: number) {
  const m = await buildMerchant(database.db);
  const endpoint = await call(apiUrl, 'POST', '/v1/webhook_endpoints', {
    key: m.secretKey,
    idempotencyKey: `idem_${randomString(16)}`,
    body: { url: `https://127.0.0.1:${receiver.port}${path}`, events: ['checkout.session.completed'], mode: 'test' },
  });
  expect(endpoint.status).toBe(201);
  const pub = shopper({ baseUrl: apiUrl }, m.publishableKey);
  for (let i = 0; i < sessions; i++) {
    const created = await call(apiUrl, 'POST', '/v1/checkout/sessions', {
      key: m.secretKey,
      body: payableBody(),
      idempotencyKey: `idem_${randomString(16)}`,
    });
    expect(created.status).toBe(201);
    const paid = await pub('POST', `/sessions/${created.body.code}/attempts`, { body: { method: 'cashondelivery' } });
    expect(paid.status).toBe(201);
  }
}

/** The `# TYPE` lines (name → type) of the exposition text `url` serves. */
async function exportedTypes(url: string): Promise<Map<string, string>> {
  const text = await (await fetch(url)).text();
  return new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1], m[2]]));
}

describe('metrics scraped by a real Prometheus', () => {
  const received = (path: string) => receiver.requests.filter((r) => r.path === path).length;

  beforeAll(async () => {
    await payingMerchant('/ok', 3);
    await payingMerchant('/fail', 1);
    await receiver.waitFor(3, '/ok', 60_000);
    await receiver.waitFor(1, '/fail', 60_000);
  }, 120_000);

  it('scrapes both processes, each with its role', async () => {
    expect(await eventually('up{job="api"}', (v) => v === 1)).toBe(1);
    expect(await eventually('up{job="worker"}', (v) => v === 1)).toBe(1);
    expect(await eventually('svc_process_role_info{job="api",role="api"}', (v) => v === 1)).toBe(1);
    expect(await eventually('svc_process_role_info{job="worker",role="worker"}', (v) => v === 1)).toBe(1);
  });

  it('times HTTP requests by route template and status class, never by raw path', async () => {
    const creates =
      'svc_http_request_duration_seconds_count{job="api",api="checkout",method="POST",route="/v1/checkout/sessions",status_class="2xx"}';
    expect(await eventually(creates, (v) => v === 4)).toBe(4);
    const attempts =
      'svc_http_request_duration_seconds_count{job="api",api="public",route="/v1/public/sessions/:code/attempts",status_class="2xx"}';
    expect(await eventually(attempts, (v) => v === 4)).toBe(4);
    expect(await query('svc_http_request_duration_seconds_count{route=~".*cs_test.*"}')).toEqual([]);
    expect(await eventually('sum(svc_http_requests_in_flight{job="api"})', (v) => v >= 0)).toBeGreaterThanOrEqual(0);
  });

  it('counts sessions created and completed, and attempts by method and outcome, once each', async () => {
    expect(await eventually('sum(svc_checkout_sessions_created_total{mode="test"})', (v) => v === 4)).toBe(4);
    const completed =
      'sum(svc_checkout_sessions_completed_total{mode="test",payment_status="requires_offline_collection"})';
    expect(await eventually(completed, (v) => v === 4)).toBe(4);
    const attempts = 'sum(svc_checkout_payment_attempts_total{method="cashondelivery",outcome="succeeded"})';
    expect(await eventually(attempts, (v) => v === 4)).toBe(4);
  });

  it('counts each webhook attempt by outcome, as the receiver saw them (a 500 is http_5xx)', async () => {
    const failed = received('/fail');
    const delivered = received('/ok');
    expect(failed).toBeGreaterThanOrEqual(1);
    expect(await eventually('sum(svc_webhook_attempts_total{outcome="http_5xx"})', (v) => v === failed)).toBe(failed);
    expect(await eventually('sum(svc_webhook_attempts_total{outcome="delivered"})', (v) => v === delivered)).toBe(
      delivered,
    );
    expect(await eventually('sum(svc_webhook_delivery_lag_seconds_count)', (v) => v === delivered)).toBe(delivered);
  });

  it('shows the failing delivery in the backlog gauges, and how long it is overdue once its retry time passes', async () => {
    expect(await eventually('svc_webhook_deliveries_pending{job="worker"}', (v) => v === 1)).toBe(1);
    // Waiting for its retry (a minute after the 500), the failing delivery is not due yet.
    expect(await eventually('svc_webhook_oldest_due_delivery_age_seconds{job="worker"}', (v) => v === 0)).toBe(0);
    // Its retry time passes unnoticed (a lost wake; the dispatcher's sweep wakes rows 30 s overdue):
    // the gauge shows how long it has been due.
    await database.db('webhook_queue').update({ next_attempt_at: database.db.raw("now() - interval '10 seconds'") });
    const due = await eventually('svc_webhook_oldest_due_delivery_age_seconds{job="worker"}', (v) => v >= 10);
    expect(due).toBeGreaterThanOrEqual(10);
    expect(await eventually('svc_handoff_oldest_age_seconds{job="worker"}', (v) => v === 0)).toBe(0);
    // No outbox transport in this worker: no outbox backlog series (the messages stay by design), given-up from 0.
    expect(await eventually('absent(svc_outbox_pending{job="worker"})', (v) => v === 1)).toBe(1);
    expect(await eventually('sum(svc_outbox_given_up_total{job="worker"})', (v) => v === 0)).toBe(0);
    expect(await eventually('count(svc_outbox_given_up_total{job="worker"})', (v) => v === 2)).toBe(2);
  });

  it('exports the Temporal SDK metrics through the worker, in seconds', async () => {
    for (const name of [
      'temporal_workflow_task_schedule_to_start_latency_seconds_count',
      'temporal_activity_schedule_to_start_latency_seconds_count',
    ]) {
      expect(await eventually(`sum(${name}{job="worker"})`, (v) => v > 0)).toBeGreaterThan(0);
    }
    expect(await eventually('count(temporal_worker_task_slots_available{job="worker"})', (v) => v > 0)).toBeGreaterThan(
      0,
    );
    expect(await eventually('count(temporal_num_pollers{job="worker"})', (v) => v > 0)).toBeGreaterThan(0);
  });

  it('exports the Postgres pool and the Node runtime of each process', async () => {
    for (const job of ['api', 'worker']) {
      expect(await eventually(`count(svc_db_pool_connections{job="${job}"})`, (v) => v === 2)).toBe(2);
      expect(await eventually(`count(svc_db_pool_waiting{job="${job}"})`, (v) => v === 1)).toBe(1);
      expect(await eventually(`count(svc_nodejs_eventloop_lag_seconds{job="${job}"})`, (v) => v === 1)).toBe(1);
      expect(await eventually(`count(svc_nodejs_heap_size_used_bytes{job="${job}"})`, (v) => v === 1)).toBe(1);
    }
  });

  it('exports every metric of the contract (ops/metrics.json) with its type, the SDK ones from the worker only', async () => {
    const contract = JSON.parse(readFileSync(join(__dirname, '..', '..', 'ops', 'metrics.json'), 'utf8')) as {
      metrics: Array<{ name: string; type: string }>;
    };
    const [api, worker] = await Promise.all([
      exportedTypes(`${apiMetricsUrl}/metrics`),
      exportedTypes(`${workerMetricsUrl}/metrics`),
    ]);
    const missing = contract.metrics.flatMap(({ name, type }) => {
      if (FIRST_EVENT_ONLY.has(name)) return [];
      // A counter's family may be named without its _total suffix.
      const family = type === 'counter' ? name.replace(/_total$/, '') : name;
      const typeIn = (exported: Map<string, string>) => exported.get(family) ?? exported.get(name);
      // Ours from whichever process produces them; the SDK's from the worker (the API's client has none).
      const found = name.startsWith('temporal_') ? typeIn(worker) : (typeIn(api) ?? typeIn(worker));
      return found === type ? [] : [`${name} (${type}): ${found}`];
    });
    expect(missing).toEqual([]);
  });
});
