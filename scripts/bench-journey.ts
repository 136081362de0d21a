import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { createDb, migrateLatest } from '../src/db/knex';
import { checkoutScopes } from '../src/keys/scopes';
import { randomString } from '../src/lib/ids';
import { setLogLevel } from '../src/lib/log';
import { createCheckoutKey } from '../src/ops/checkout-keys';
import { createMerchant } from '../src/ops/merchants';
import { verify } from '../src/webhooks/verify';
import { startHttpsReceiver, type ReceivedRequest } from '../test/helpers/https-receiver';
import { databaseBackends, meterCpu } from './bench/cpu';
import { startBenchEnvironment } from './bench/environment';
import { percentile, table } from './bench/measure';
import { journeySessionBody } from './bench/sessions';
import { benchServiceEnv, startWorkerAndApi } from './bench/services';

/**
 * `npm run bench:journey`: whole checkout journeys of many merchants at once, through the real
 * path, at a fixed arrival rate for a fixed time. Each journey: the merchant creates a session
 * (secret key), the shopper's browser reads it on the public route, starts a test attempt, presses
 * Succeed on the test gateway and polls the attempt until it is paid, and the merchant's HTTPS
 * receiver (loopback, self-signed certificate) gets the signed `checkout.session.completed`, whose
 * signature is checked with the endpoint's secret.
 *
 * The API and the worker run as separate child processes (`src/main/api.ts`, `src/main/worker.ts`,
 * as `npm run api` / `npm run worker` start them), on a tuned `temporal server start-dev` and a
 * database of their own (DATABASE_URL's server, or an embedded Postgres when unset). Arrivals are
 * open-loop: a new journey starts every 1/BENCH_RATE s whatever the others are doing, for
 * BENCH_DURATION_S seconds; the run then waits for the journeys in flight (at most
 * BENCH_DRAIN_S seconds, after which the unfinished ones count as errors).
 *
 * Prints journeys per second, p50/p95/p99 of each step and of the whole journey, the errors (the
 * run exits 1 when there is any), and the CPU time of the API, the worker, Postgres (the backends of
 * the bench database) and Temporal, read from /proc, so that the bottleneck is visible.
 *
 * BENCH_RATE (journeys/s, default 5), BENCH_DURATION_S (60), BENCH_MERCHANTS (20),
 * BENCH_POLL_MS (the browser's poll interval, 100), BENCH_DRAIN_S (60), BENCH_POOL (each process's
 * DATABASE_POOL_MAX, default the setting's default). BENCH_FAILING_ENDPOINT=1 gives the first
 * merchant a second endpoint that always answers 500 (its deliveries retry beside the others; the
 * journeys do not wait for them), so that the webhook metrics show failures too.
 */

const RATE = Number(process.env.BENCH_RATE ?? 5);
const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 60);
const MERCHANTS = Number(process.env.BENCH_MERCHANTS ?? 20);
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 100);
const DRAIN_S = Number(process.env.BENCH_DRAIN_S ?? 60);
const FAILING_ENDPOINT = process.env.BENCH_FAILING_ENDPOINT === '1';
const NAMESPACE = 'default';
const STEPS = ['create', 'read', 'attempt', 'press', 'paid', 'webhook'] as const;
type Step = (typeof STEPS)[number];
const STEP_HELP: Record<Step, string> = {
  create: 'POST /v1/checkout/sessions',
  read: 'GET /v1/public/sessions/{code}',
  attempt: 'POST /v1/public/sessions/{code}/attempts',
  press: 'POST /v1/public/test-gateway/{id}/decide',
  paid: 'press answered -> poll sees succeeded',
  webhook: 'press answered -> receiver gets the event',
};

const log = (line: string) => process.stdout.write(`${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Merchant {
  secretKey: string;
  publishableKey: string;
  /** The endpoint's signing secret. */
  secret: string;
}

/** A JSON call; throws with the status and body when the status is not `expected`. */
async function call(
  url: string,
  method: string,
  expected: number,
  headers: Record<string, string>,
  body?: unknown,
): Promise<any> {
  const res = await fetch(url, {
    method,
    headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status !== expected) throw new Error(`${method} ${new URL(url).pathname} answered ${res.status}: ${text}`);
  return JSON.parse(text);
}

async function main(): Promise<void> {
  setLogLevel('silent');
  const env = await startBenchEnvironment('journey', NAMESPACE, log);
  try {
    const receiver = await startHttpsReceiver();
    env.onClose(() => receiver.close());
    const db = createDb(env.databaseUrl, 4);
    env.onClose(() => db.destroy());
    await migrateLatest(db);

    const { baseUrl, serviceEnv: common } = await benchServiceEnv(env, 'journey', NAMESPACE);
    const serviceEnv: NodeJS.ProcessEnv = {
      ...common,
      // The receiver is on loopback with a self-signed certificate (for 127.0.0.1).
      WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
      WEBHOOK_EXTRA_CA_PATH: receiver.caPath,
      CHECKOUT_RATE_LIMIT_PER_SECOND: '1000000',
      // Each journey's browser sends its own X-Forwarded-For, so per-IP limits stay per shopper.
      TRUST_PROXY: '1',
      ...(process.env.BENCH_POOL ? { DATABASE_POOL_MAX: process.env.BENCH_POOL } : {}),
    };
    const { worker, api } = await startWorkerAndApi(env, 'journey', serviceEnv, baseUrl, log);

    log(`Creating ${MERCHANTS} merchants, each with keys and a webhook endpoint...`);
    const merchants: Merchant[] = [];
    for (let i = 0; i < MERCHANTS; i++) {
      const m = await createMerchant(db, {
        name: `Journey merchant ${i}`,
        returnHosts: ['shop.example.com'],
        methods: ['test'],
        testMerchant: true,
      });
      const keys = await Promise.all(
        (['secret', 'publishable'] as const).map((type) =>
          createCheckoutKey(db, { merchantId: m.merchant_id, mode: 'test', type, scopes: [...checkoutScopes] }),
        ),
      );
      const addEndpoint = (path: string) =>
        call(
          `${baseUrl}/v1/webhook_endpoints`,
          'POST',
          201,
          { authorization: `Bearer ${keys[0].key}`, 'idempotency-key': `bench_${randomString(20)}` },
          { url: `https://127.0.0.1:${receiver.port}${path}`, events: ['checkout.session.completed'], mode: 'test' },
        );
      const endpoint = await addEndpoint(`/m${i}`);
      merchants.push({ secretKey: keys[0].key, publishableKey: keys[1].key, secret: endpoint.secret });
      if (FAILING_ENDPOINT && i === 0) await addEndpoint('/failing');
    }

    // The receiver hands each verified completion to the journey waiting for its session.
    const completions = new Map<string, (at: number) => void>();
    const early = new Map<string, number>();
    let badSignatures = 0;
    receiver.respond = (req: ReceivedRequest) => {
      if (req.path === '/failing') return { status: 500 };
      const index = Number(req.path.slice(2));
      try {
        const event = verify(req.body, req.headers['svc-signature'] as string, merchants[index].secret);
        const sessionId = (event.data.object as { id: string }).id;
        const at = performance.timeOrigin + performance.now() - (Date.now() - req.at);
        const done = completions.get(sessionId);
        if (done) done(at);
        else early.set(sessionId, at);
      } catch {
        badSignatures++;
      }
      return { status: 200 };
    };

    const times: Record<Step | 'total', number[]> = {
      create: [],
      read: [],
      attempt: [],
      press: [],
      paid: [],
      webhook: [],
      total: [],
    };
    const errors: string[] = [];
    let completed = 0;

    /** One journey of merchant `m`, each step timed; throws on the first thing that goes wrong. */
    const journey = async (m: Merchant, i: number) => {
      const started = performance.now();
      let mark = started;
      const lap = (step: Step) => {
        const now = performance.now();
        times[step].push(now - mark);
        mark = now;
      };
      const browser = {
        authorization: `Bearer ${m.publishableKey}`,
        'x-forwarded-for': `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
      };
      const session = await call(
        `${baseUrl}/v1/checkout/sessions`,
        'POST',
        201,
        { authorization: `Bearer ${m.secretKey}`, 'idempotency-key': `bench_${randomString(24)}` },
        journeySessionBody(`journey-${i}-${randomString(8)}`),
      );
      const webhook = new Promise<number>((resolve) => {
        const at = early.get(session.id);
        if (at !== undefined) resolve(at);
        else completions.set(session.id, resolve);
      });
      lap('create');
      const code = new URL(session.url).pathname.split('/').pop()!;
      await call(`${baseUrl}/v1/public/sessions/${code}`, 'GET', 200, browser);
      lap('read');
      const attempt = await call(`${baseUrl}/v1/public/sessions/${code}/attempts`, 'POST', 201, browser, {
        method: 'test',
      });
      lap('attempt');
      await call(`${baseUrl}/v1/public/test-gateway/${attempt.attempt_id}/decide`, 'POST', 200, browser, {
        decision: 'succeeded',
      });
      lap('press');
      const pressed = mark;
      for (;;) {
        const state = await call(`${baseUrl}/v1/public/attempts/${attempt.attempt_id}`, 'GET', 200, browser);
        if (state.status === 'succeeded' && state.payment_status === 'paid') break;
        if (state.status !== 'pending') throw new Error(`the attempt ended ${state.status}`);
        await sleep(POLL_MS);
      }
      lap('paid');
      const webhookAt = (await webhook) - performance.timeOrigin;
      completions.delete(session.id);
      times.webhook.push(webhookAt - pressed);
      times.total.push(Math.max(mark, webhookAt) - started);
      completed++;
    };

    log(`Running journeys at ${RATE}/s for ${DURATION_S} s (open loop)...`);
    const cpuMeter = await meterCpu(
      {
        API: async () => [api.pid!],
        worker: async () => [worker.pid!],
        'Postgres (bench database backends)': () => databaseBackends(db),
        'Temporal dev server': async () => (env.temporalPid ? [env.temporalPid] : []),
      },
      'this script (load and receiver)',
    );

    const inFlight: Array<Promise<void>> = [];
    const runStarted = performance.now();
    const total = Math.round(RATE * DURATION_S);
    for (let i = 0; i < total; i++) {
      const due = runStarted + (i * 1000) / RATE;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      const m = merchants[i % merchants.length];
      inFlight.push(
        journey(m, i).catch((err) => {
          errors.push(err instanceof Error ? err.message : String(err));
        }),
      );
    }
    const arrivalsEnded = performance.now();
    const drained = await Promise.race([
      Promise.all(inFlight).then(() => true),
      sleep(DRAIN_S * 1000).then(() => false),
    ]);
    const runEnded = performance.now();
    // Each journey still running after the drain is an error of its own.
    const unfinished = drained ? 0 : total - completed - errors.length;
    for (let i = 0; i < unfinished; i++) errors.push(`unfinished ${DRAIN_S} s after the last arrival`);

    const wallS = (runEnded - runStarted) / 1000;
    const cpu = await cpuMeter.stop();
    const cpuTotal = cpu.reduce((n, [, s]) => n + s, 0);

    const ms = (n: number | undefined) => (n === undefined ? '-' : `${n.toFixed(0)} ms`);
    const row = (name: string, help: string, values: number[]) => [
      name,
      help,
      String(values.length),
      ms(percentile(values, 50)),
      ms(percentile(values, 95)),
      ms(percentile(values, 99)),
    ];
    log('');
    log(
      `${completed} journeys completed in ${wallS.toFixed(1)} s: ${(completed / wallS).toFixed(1)} journeys/s ` +
        `(offered ${RATE}/s for ${DURATION_S} s; arrivals took ${((arrivalsEnded - runStarted) / 1000).toFixed(1)} s)`,
    );
    log(
      `errors: ${errors.length + badSignatures}` +
        (badSignatures ? ` (${badSignatures} webhook signatures refused)` : '') +
        (unfinished ? ` (${unfinished} unfinished ${DRAIN_S} s after the last arrival)` : '') +
        (errors.length > unfinished ? `; first: ${errors.slice(0, 3).join(' | ')}` : ''),
    );
    log('');
    log(
      table([
        ['step', 'what', 'n', 'p50', 'p95', 'p99'],
        ...STEPS.map((s) => row(s, STEP_HELP[s], times[s])),
        row('end to end', 'create -> paid and webhook received', times.total),
      ]),
    );
    log('');
    log(
      table([
        ['process', 'CPU s', 'cores busy', 'share'],
        ...cpu.map(([name, s]) => [
          name,
          s.toFixed(1),
          (s / wallS).toFixed(2),
          `${((s / Math.max(cpuTotal, 1e-9)) * 100).toFixed(0)}%`,
        ]),
      ]),
    );
    log(
      `\n${MERCHANTS} merchants, poll every ${POLL_MS} ms; Node ${process.version}, ${cpus().length} CPUs ` +
        `(${cpus()[0]?.model ?? 'unknown'}), load average at the end ${loadavg()
          .map((n) => n.toFixed(2))
          .join(' ')}.`,
    );
    if (errors.length + badSignatures > 0) {
      process.exitCode = 1;
      for (const child of [api, worker]) log(`\n${child.report()}`);
    }
  } finally {
    await env.close();
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
