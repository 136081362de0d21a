import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Client as TemporalClient, Connection } from '@temporalio/client';
import { createDb, migrateLatest } from '../src/db/knex';
import { checkoutScopes } from '../src/keys/scopes';
import { randomString } from '../src/lib/ids';
import { setLogLevel } from '../src/lib/log';
import { createCheckoutKey } from '../src/ops/checkout-keys';
import { createMerchant } from '../src/ops/merchants';
import { verify } from '../src/webhooks/verify';
import { startHttpsReceiver, type ReceivedRequest } from '../test/helpers/https-receiver';
import { type CpuGroups, databaseBackends, meterCpu, profileClockUs, writeProfileWindow } from './bench/cpu';
import { meterTransitions, startBenchEnvironment, temporalCpuGroups, transitionsLine } from './bench/environment';
import { percentile, perSecond, runClosedLoop, table } from './bench/measure';
import { journeySessionBody } from './bench/sessions';
import { benchServiceEnv, startTsChild, startWorkerAndApi } from './bench/services';
import { waitFor } from './processes';

/**
 * `npm run bench:journey`: whole checkout journeys of many merchants at once, through the real
 * path, at a fixed arrival rate for a fixed time, beside a floor measured in the same run on the
 * same server. Each journey: the merchant creates a session (secret key), the shopper's browser
 * reads it on the public route, starts a test attempt, presses Succeed on the test gateway and
 * hears the outcome on the attempt's event stream (as the return page does; polls when the stream
 * ends first, or with BENCH_PAID=poll), and the merchant's HTTPS receiver (loopback, self-signed
 * certificate) gets the signed `checkout.session.completed`, whose signature is checked.
 *
 * The API and the worker run as separate child processes (`src/main/api.ts`, `src/main/worker.ts`,
 * as `npm run api` / `npm run worker` start them), on a tuned `temporal server start-dev` and a
 * database of their own (DATABASE_URL's server, or an embedded Postgres when unset). Arrivals are
 * open-loop: a new journey starts every 1/BENCH_RATE s whatever the others are doing, for
 * BENCH_DURATION_S seconds; the run then waits for the journeys in flight (at most BENCH_DRAIN_S
 * seconds, after which the unfinished ones count as errors).
 *
 * The floor (as bench:sessions has it): bare starts of an empty workflow, run by a worker process
 * of its own (scripts/bench/noop-worker.ts), on the same Temporal server at concurrency 16: their
 * rate and the stack's CPU per start. Then the steady load, then a saturation search: short loads
 * (BENCH_STEP_S each, drained for up to BENCH_STEP_DRAIN_S) at offered rates doubled from
 * BENCH_RATE until "press -> paid" p95 reaches 1 s (an error or an unfinished journey counts as
 * over), then bisected to within 15 %, BENCH_SEARCH_STEPS at most; BENCH_SEARCH=0 skips it.
 *
 * Prints journeys per second, p50/p95/p99 of each step and of the whole journey, the errors (the
 * run exits 1 when there is any), the CPU time of the API, the worker, Postgres (the backends of
 * the bench database) and Temporal, read from /proc, per journey and per bare start, and the
 * ratios: CPU per journey / CPU per bare start, saturation rate / bare-start rate. BENCH_STRICT=1
 * exits 1 when a target of issue 35 is missed (CPU per journey at most 4 bare starts, press -> paid
 * p50 <= 30 ms and p95 <= 100 ms at BENCH_RATE, no error); a miss says which process spends the
 * CPU beyond a bare start's.
 *
 * BENCH_RATE (journeys/s, default 5), BENCH_DURATION_S (30), BENCH_MERCHANTS (20),
 * BENCH_POLL_MS (the browser's poll interval, 100), BENCH_DRAIN_S (60), BENCH_POOL (each process's
 * DATABASE_POOL_MAX, default the setting's default), BENCH_FLOOR_STARTS (400),
 * BENCH_FLOOR_CONCURRENCY (16), BENCH_STEP_S (10), BENCH_STEP_DRAIN_S (20), BENCH_SEARCH_STEPS (7).
 * BENCH_FAILING_ENDPOINT=1 gives the first merchant a second endpoint that always answers 500 (its
 * deliveries retry beside the others; the journeys do not wait for them), so that the webhook
 * metrics show failures too.
 */

const RATE = Number(process.env.BENCH_RATE ?? 5);
const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 30);
const MERCHANTS = Number(process.env.BENCH_MERCHANTS ?? 20);
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 100);
const DRAIN_S = Number(process.env.BENCH_DRAIN_S ?? 60);
const FAILING_ENDPOINT = process.env.BENCH_FAILING_ENDPOINT === '1';
/** How the shopper's page hears "paid": the attempt's event stream (as the return page does), or polls. */
const PAID_BY = process.env.BENCH_PAID === 'poll' ? 'poll' : 'stream';
const FLOOR_STARTS = Number(process.env.BENCH_FLOOR_STARTS ?? 400);
const FLOOR_CONCURRENCY = Number(process.env.BENCH_FLOOR_CONCURRENCY ?? 16);
/** The saturation search: off with 0; each step's length, its drain, the most steps. */
const SEARCH = process.env.BENCH_SEARCH !== '0';
const STEP_S = Number(process.env.BENCH_STEP_S ?? 10);
const STEP_DRAIN_S = Number(process.env.BENCH_STEP_DRAIN_S ?? 20);
const SEARCH_STEPS = Number(process.env.BENCH_SEARCH_STEPS ?? 7);
const STRICT = process.env.BENCH_STRICT === '1';
/** The issue's targets: CPU per journey in bare starts; press -> paid at BENCH_RATE; the saturation bound. */
const TARGET = { cpuStarts: 4, paidP50Ms: 30, paidP95Ms: 100, saturationP95Ms: 1000 } as const;
const NAMESPACE = 'default';
const POSTGRES = 'Postgres (bench database backends)';
const FLOOR_WORKER = 'floor worker';
const STEPS = ['create', 'read', 'attempt', 'press', 'paid', 'webhook'] as const;
type Step = (typeof STEPS)[number];
const STEP_HELP: Record<Step, string> = {
  create: 'POST /v1/checkout/sessions',
  read: 'GET /v1/public/sessions/{code}',
  attempt: 'POST /v1/public/sessions/{code}/attempts',
  press: 'POST /v1/public/test-gateway/{id}/decide',
  paid: 'press answered -> the page hears succeeded',
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

/**
 * Reads the attempt's event stream until an `attempt` event says it is no longer pending; resolves
 * with that answer, or undefined when the stream ended first (a `reconnect`, a dropped connection):
 * the page then polls.
 */
async function streamOutcome(url: string, headers: Record<string, string>): Promise<any | undefined> {
  const abort = new AbortController();
  const res = await fetch(url, { headers: { ...headers, accept: 'text/event-stream' }, signal: abort.signal });
  if (res.status !== 200 || !res.body) throw new Error(`GET ${new URL(url).pathname} answered ${res.status}`);
  const decoder = new TextDecoder();
  let buffered = '';
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffered += decoder.decode(chunk, { stream: true });
      for (let end = buffered.indexOf('\n\n'); end >= 0; end = buffered.indexOf('\n\n')) {
        const frame = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const event = /^event: (.*)$/m.exec(frame)?.[1];
        const data = /^data: (.*)$/m.exec(frame)?.[1];
        if (event === 'reconnect') return undefined;
        if (event !== 'attempt' || data === undefined) continue;
        const answer = JSON.parse(data);
        if (answer.status !== 'pending') return answer;
      }
    }
    return undefined;
  } finally {
    abort.abort();
  }
}

/** What one load (journeys at a fixed offered rate for a while) measured. */
interface LoadResult {
  rate: number;
  offered: number;
  completed: number;
  times: Record<Step | 'total', number[]>;
  /** Each journey's "press -> paid", or Infinity for one that errored or did not finish (sorted last). */
  paidOrWorse: number[];
  errors: string[];
  badSignatures: number;
  unfinished: number;
  wallS: number;
  arrivalsS: number;
  cpu: Array<[string, number]>;
  /** The Temporal server's state transitions during the load. */
  transitions: number | undefined;
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

    // The floor: bare starts of an empty workflow on the same server, run by a worker process of its own.
    const floorQueue = `bench-floor-${randomString(6)}`;
    const floorLogs = mkdtempSync(join(tmpdir(), 'svc-bench-journey-floor-'));
    env.onClose(async () => rmSync(floorLogs, { recursive: true, force: true }));
    const floorWorker = startTsChild(
      'floor worker',
      'scripts/bench/noop-worker.ts',
      { ...serviceEnv, TEMPORAL_TASK_QUEUE: floorQueue },
      join(floorLogs, 'floor-worker.log'),
    );
    await waitFor(
      'the floor worker',
      async () => readFileSync(join(floorLogs, 'floor-worker.log'), 'utf8').includes('worker running'),
      { timeoutMs: 180_000, watched: [floorWorker] },
    );
    const connection = await Connection.connect({ address: env.temporalAddress });
    env.onClose(() => connection.close());
    const temporal = new TemporalClient({ connection, namespace: NAMESPACE });

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

    const cpuGroups: CpuGroups = {
      API: async () => [api.pid!],
      worker: async () => [worker.pid!],
      [POSTGRES]: () => databaseBackends(db),
      ...temporalCpuGroups(env.temporal),
      [FLOOR_WORKER]: async () => [floorWorker.pid!],
    };
    let journeys = 0;
    /** What the press answered (`pending`, or the outcome when the workflow's Update answered it). */
    const pressAnswers = new Map<string, number>();

    /** One journey of merchant `m`, each step timed into `times`; throws on the first thing that goes wrong. */
    const journey = async (m: Merchant, times: LoadResult['times']): Promise<number> => {
      const i = journeys++;
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
      const pressedAnswer = await call(
        `${baseUrl}/v1/public/test-gateway/${attempt.attempt_id}/decide`,
        'POST',
        200,
        browser,
        { decision: 'succeeded' },
      );
      pressAnswers.set(pressedAnswer.status, (pressAnswers.get(pressedAnswer.status) ?? 0) + 1);
      lap('press');
      const pressed = mark;
      let state =
        PAID_BY === 'stream'
          ? await streamOutcome(`${baseUrl}/v1/public/attempts/${attempt.attempt_id}/stream`, browser)
          : undefined;
      // Polling: the page's own way, and its fallback when the stream ends early.
      while (state === undefined || state.status === 'pending') {
        if (state !== undefined) await sleep(POLL_MS);
        state = await call(`${baseUrl}/v1/public/attempts/${attempt.attempt_id}`, 'GET', 200, browser);
      }
      if (state.status !== 'succeeded' || state.payment_status !== 'paid')
        throw new Error(`the attempt ended ${state.status}`);
      lap('paid');
      const paid = times.paid[times.paid.length - 1];
      const webhookAt = (await webhook) - performance.timeOrigin;
      completions.delete(session.id);
      times.webhook.push(webhookAt - pressed);
      times.total.push(Math.max(mark, webhookAt) - started);
      return paid;
    };

    /**
     * Journeys at `rate`/s for `seconds` (open loop), then waits for the ones in flight (at most
     * `drainS`; each one still running counts as an error), with the CPU of each process group.
     */
    const runLoad = async (rate: number, seconds: number, drainS: number): Promise<LoadResult> => {
      const times: LoadResult['times'] = {
        create: [],
        read: [],
        attempt: [],
        press: [],
        paid: [],
        webhook: [],
        total: [],
      };
      const errors: string[] = [];
      const paidOrWorse: number[] = [];
      const signaturesBefore = badSignatures;
      let completed = 0;
      const cpuMeter = await meterCpu(cpuGroups, 'this script (load and receiver)', 'other processes on the machine');
      const transitionMeter = await meterTransitions(env.temporal);
      const inFlight: Array<Promise<void>> = [];
      const runStarted = performance.now();
      const offered = Math.round(rate * seconds);
      for (let i = 0; i < offered; i++) {
        const due = runStarted + (i * 1000) / rate;
        const wait = due - performance.now();
        if (wait > 0) await sleep(wait);
        inFlight.push(
          journey(merchants[i % merchants.length], times).then(
            (paid) => {
              completed++;
              paidOrWorse.push(paid);
            },
            (err: unknown) => {
              errors.push(err instanceof Error ? err.message : String(err));
            },
          ),
        );
      }
      const arrivalsEnded = performance.now();
      const all = Promise.all(inFlight);
      const drained = await Promise.race([all.then(() => true), sleep(drainS * 1000).then(() => false)]);
      const runEnded = performance.now();
      const cpu = await cpuMeter.stop();
      const transitions = await transitionMeter.stop();
      const unfinished = drained ? 0 : offered - completed - errors.length;
      for (let i = 0; i < unfinished; i++) errors.push(`unfinished ${drainS} s after the last arrival`);
      // As the drain left them: a journey finishing later counts as over.
      const paidAtDrain = [...paidOrWorse, ...Array<number>(Math.max(0, offered - paidOrWorse.length)).fill(Infinity)];
      // Nothing of this load may spill into the next one's figures.
      if (!drained) await Promise.race([all, sleep(DRAIN_S * 1000)]);
      return {
        rate,
        offered,
        completed,
        times,
        paidOrWorse: paidAtDrain,
        errors,
        badSignatures: badSignatures - signaturesBefore,
        unfinished,
        wallS: (runEnded - runStarted) / 1000,
        arrivalsS: (arrivalsEnded - runStarted) / 1000,
        cpu,
        transitions,
      };
    };

    const startNoop = async () => {
      await temporal.workflow.start('benchNoopWorkflow', {
        workflowId: `bench-noop-${randomString(20)}`,
        taskQueue: floorQueue,
      });
    };
    log(`Floor: ${FLOOR_STARTS} bare workflow starts at concurrency ${FLOOR_CONCURRENCY} (after 100 to warm up)...`);
    await runClosedLoop(100, FLOOR_CONCURRENCY, startNoop);
    const floorMeter = await meterCpu(cpuGroups, 'this script (load and receiver)', 'other processes on the machine');
    const floorTransitionMeter = await meterTransitions(env.temporal);
    const floorBatch = await runClosedLoop(FLOOR_STARTS, FLOOR_CONCURRENCY, startNoop);
    const floorCpu = await floorMeter.stop();
    const floorTransitions = await floorTransitionMeter.stop();
    const floorRate = perSecond(floorBatch);

    log(`Warming up: 20 journeys at 2/s...`);
    await runLoad(2, 10, DRAIN_S);
    log(`Running journeys at ${RATE}/s for ${DURATION_S} s (open loop; "paid" heard by ${PAID_BY})...`);
    const steadyStartUs = profileClockUs();
    const steady = await runLoad(RATE, DURATION_S, DRAIN_S);
    if (process.env.BENCH_CPU_PROF_DIR) {
      const window = { startUs: steadyStartUs, endUs: profileClockUs(), count: steady.completed };
      writeProfileWindow(process.env.BENCH_CPU_PROF_DIR, 'window.json', window);
    }

    // The saturation search: the highest offered rate whose "press -> paid" p95 stays under 1 s.
    const steps: Array<{ rate: number; p95: number; done: string; pass: boolean }> = [];
    const passes = (r: LoadResult) =>
      r.errors.length + r.badSignatures === 0 && percentile(r.paidOrWorse, 95) < TARGET.saturationP95Ms;
    let saturation: number | undefined;
    if (SEARCH) {
      log(`Saturation search: steps of ${STEP_S} s, each drained for up to ${STEP_DRAIN_S} s...`);
      let low = passes(steady) ? RATE : 0;
      let high: number | undefined;
      let rate = low > 0 ? low * 2 : RATE / 2;
      for (let n = 0; n < SEARCH_STEPS; n++) {
        const r = await runLoad(rate, STEP_S, STEP_DRAIN_S);
        const pass = passes(r);
        const p95 = percentile(r.paidOrWorse, 95);
        steps.push({ rate, p95, done: `${r.completed} of ${r.offered}`, pass });
        log(
          `  ${rate.toFixed(1)}/s: press -> paid p95 ${Number.isFinite(p95) ? `${p95.toFixed(0)} ms` : 'unfinished'}, ` +
            `${r.completed} of ${r.offered} done, ${r.errors.length} errors: ${pass ? 'under 1 s' : 'over'}`,
        );
        if (pass) low = Math.max(low, rate);
        else high = Math.min(high ?? Infinity, rate);
        if (high !== undefined && low > 0 && (high - low) / low <= 0.15) break;
        if (high !== undefined && high <= 1) break;
        rate = high === undefined ? rate * 2 : Math.round(((low + high) / 2) * 2) / 2;
        if (rate === low || rate === high) break;
      }
      saturation = low;
    }

    const ms = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? '-' : `${n.toFixed(0)} ms`);
    const row = (name: string, help: string, values: number[]) => [
      name,
      help,
      String(values.length),
      ms(percentile(values, 50)),
      ms(percentile(values, 95)),
      ms(percentile(values, 99)),
    ];
    const errorCount = steady.errors.length + steady.badSignatures;
    log('');
    log(
      `${steady.completed} journeys completed in ${steady.wallS.toFixed(1)} s: ${(steady.completed / steady.wallS).toFixed(1)} journeys/s ` +
        `(offered ${RATE}/s for ${DURATION_S} s; arrivals took ${steady.arrivalsS.toFixed(1)} s)`,
    );
    log(
      `errors: ${errorCount}` +
        (steady.badSignatures ? ` (${steady.badSignatures} webhook signatures refused)` : '') +
        (steady.unfinished ? ` (${steady.unfinished} unfinished ${DRAIN_S} s after the last arrival)` : '') +
        (steady.errors.length > steady.unfinished ? `; first: ${steady.errors.slice(0, 3).join(' | ')}` : ''),
    );
    log(`press answered (all loads): ${[...pressAnswers].map(([status, n]) => `${status} ${n}`).join(', ')}`);
    log('');
    log(
      table([
        ['step', 'what', 'n', 'p50', 'p95', 'p99'],
        ...STEPS.map((s) => row(s, STEP_HELP[s], steady.times[s])),
        row('end to end', 'create -> paid and webhook received', steady.times.total),
      ]),
    );

    // CPU per journey: the journey's stack (API, worker, Postgres, Temporal); per bare start: the
    // floor's (Temporal and the floor worker). Neither counts this script or the other's idle processes.
    const TEMPORAL = Object.keys(temporalCpuGroups(env.temporal));
    const JOURNEY_STACK = ['API', 'worker', POSTGRES, ...TEMPORAL];
    const FLOOR_STACK = [...TEMPORAL, FLOOR_WORKER];
    const sum = (cpu: Array<[string, number]>, names: string[]) =>
      cpu.filter(([name]) => names.includes(name)).reduce((n, [, s]) => n + s, 0);
    const perJourney = (sum(steady.cpu, JOURNEY_STACK) * 1000) / Math.max(steady.completed, 1);
    const perStart = (sum(floorCpu, FLOOR_STACK) * 1000) / floorBatch.count;
    const floorOf = new Map(floorCpu);
    const msPer = (s: number, n: number) => `${((s * 1000) / Math.max(n, 1)).toFixed(2)} ms`;
    log('');
    log(
      table([
        ['process', 'CPU s', 'cores busy', 'share', 'per journey', 'per bare start (floor run)'],
        ...steady.cpu.map(([name, s]) => [
          name,
          s.toFixed(1),
          (s / steady.wallS).toFixed(2),
          `${((s / Math.max(sum(steady.cpu, JOURNEY_STACK), 1e-9)) * 100).toFixed(0)}%`,
          msPer(s, steady.completed),
          msPer(floorOf.get(name) ?? 0, floorBatch.count),
        ]),
        [
          'a journey: API, worker, Postgres, Temporal; a bare start: Temporal, floor worker',
          '',
          '',
          '',
          `${perJourney.toFixed(1)} ms`,
          `${perStart.toFixed(2)} ms`,
        ],
      ]),
    );

    const cpuRatio = perJourney / perStart;
    const paidP50 = percentile(steady.times.paid, 50);
    const paidP95 = percentile(steady.times.paid, 95);
    const checks: Array<[string, string, string, boolean]> = [
      [
        'CPU per journey / CPU per bare start',
        `${cpuRatio.toFixed(2)}x`,
        `<= ${TARGET.cpuStarts}x`,
        cpuRatio <= TARGET.cpuStarts,
      ],
      [`press -> paid p50 at ${RATE}/s`, ms(paidP50), `<= ${TARGET.paidP50Ms} ms`, paidP50 <= TARGET.paidP50Ms],
      [`press -> paid p95 at ${RATE}/s`, ms(paidP95), `<= ${TARGET.paidP95Ms} ms`, paidP95 <= TARGET.paidP95Ms],
      ['errors', String(errorCount), '0', errorCount === 0],
    ];
    log('');
    log(
      `Floor (same run, same server): ${floorBatch.count} bare starts at ${floorRate.toFixed(1)}/s, ` +
        `${perStart.toFixed(2)} ms of CPU each.`,
    );
    for (const line of [
      transitionsLine(env.temporal, `Journeys at ${RATE}/s`, steady.transitions, steady.completed, steady.wallS),
      transitionsLine(
        env.temporal,
        'Bare starts (floor)',
        floorTransitions,
        floorBatch.count,
        floorBatch.wallMs / 1000,
      ),
    ])
      if (line) log(line);
    if (saturation !== undefined) {
      log(
        `Saturation: press -> paid p95 under 1 s up to ${saturation.toFixed(1)} journeys/s offered ` +
          `(${steps.map((s) => `${s.rate.toFixed(1)}/s ${s.pass ? 'under' : 'over'}`).join(', ')}): ` +
          `${(saturation / floorRate).toFixed(3)}x the bare-start rate.`,
      );
    }
    log('');
    log(
      table([
        ['figure', 'value', 'target', 'result'],
        ...checks.map(([name, value, target, ok]) => [name, value, target, ok ? 'pass' : 'FAIL']),
        ...(saturation !== undefined
          ? [['saturation rate / bare-start rate', `${(saturation / floorRate).toFixed(3)}x`, 'see the baseline', '-']]
          : []),
      ]),
    );
    log(
      `\n${MERCHANTS} merchants, "paid" heard by ${PAID_BY === 'stream' ? 'the attempt stream' : `polls every ${POLL_MS} ms`}; ` +
        `Node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? 'unknown'}), load average at the end ${loadavg()
          .map((n) => n.toFixed(2))
          .join(' ')}.`,
    );
    const missed = checks.filter(([, , , ok]) => !ok);
    if (missed.length > 0) {
      log(`\nMissed: ${missed.map(([name]) => name).join('; ')}.`);
      if (missed.some(([name]) => name.startsWith('CPU'))) {
        const over = steady.cpu
          .filter(([name]) => JOURNEY_STACK.includes(name))
          .map(([name, s]): [string, number] => [name, (s * 1000) / Math.max(steady.completed, 1)])
          .sort((a, b) => b[1] - a[1]);
        log(
          `CPU per journey by process (a bare start: ${perStart.toFixed(2)} ms, the target ${(TARGET.cpuStarts * perStart).toFixed(1)} ms): ${over.map(([n, v]) => `${n} ${v.toFixed(1)} ms`).join(', ')}.`,
        );
      }
    }
    if (errorCount > 0) {
      process.exitCode = 1;
      for (const child of [api, worker]) log(`\n${child.report()}`);
    }
    if (STRICT && missed.length > 0) process.exitCode = 1;
  } finally {
    await env.close();
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
