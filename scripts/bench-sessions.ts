import { benchMetricsPorts } from './bench/metrics-ports';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { createApp } from '../src/app';
import { loadSettings } from '../src/config';
import { checkoutScopes } from '../src/keys/scopes';
import { systemClock } from '../src/lib/clock';
import { randomString } from '../src/lib/ids';
import { setLogLevel } from '../src/lib/log';
import { createCheckoutKey } from '../src/ops/checkout-keys';
import { createMerchant } from '../src/ops/merchants';
import { type CpuGroups, databaseBackends, meterCpu, STOLEN } from './bench/cpu';
import {
  connectStack,
  meterTransitions,
  startBenchEnvironment,
  temporalCpuGroups,
  transitionsLine,
} from './bench/environment';
import { benchHttpClient } from './bench/http-client';
import { startTsChild } from './bench/services';
import { compareTelemetry, SAMPLED, startOtlpSink } from './bench/telemetry';
import { Batch, combine, percentile, perSecond, runClosedLoop, table } from './bench/measure';
import { freePort, waitFor } from './processes';

/**
 * `npm run bench:sessions`: `POST /v1/checkout/sessions` at concurrency 16 over HTTP against the
 * real app (in this process) and the real worker (`src/main/worker.ts`, a process of its own as in
 * production), on a `temporal server start-dev` of its own and a database of its own, beside the
 * floor: bare starts of an empty workflow, run by a worker that is also a process of its own
 * (scripts/bench/noop-worker.ts), on the same server at the same concurrency. Targets: sessions at
 * least 0.7 times the floor's rate, median create at most 1.5 times the floor's. It also prints
 * the CPU time each process group spends per create and per floor start.
 *
 * The two are measured in alternating rounds so that both see the same machine. Uses DATABASE_URL's
 * server (a database `svc_bench_<ts>` is created and dropped), or an embedded Postgres when unset.
 * BENCH_ROUNDS, BENCH_PER_ROUND, BENCH_WARMUP and BENCH_CONCURRENCY change the sizes; BENCH_STRICT=1
 * exits 1 when the target is missed. BENCH_TELEMETRY=compare also measures the API as a process of
 * its own (`src/main/api.ts`), each with its own worker: telemetry off (no metrics server, no
 * tracing) and on (metrics served, traces to a loopback OTLP/HTTP sink, 10 % sampled), in the same
 * alternating rounds.
 */

const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6);
const PER_ROUND = Number(process.env.BENCH_PER_ROUND ?? 300);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 200);
const STRICT = process.env.BENCH_STRICT === '1';
const TARGET_RATIO = 0.7;
const TARGET_MEDIAN_RATIO = 1.5;
const NAMESPACE = 'default';
/** The CPU row of everything else on the machine: a run beside other work says so. */
const OTHERS = 'other processes on the machine (not in the figures above)';
/** Metered but not the stack's: other processes and what the host took. */
const OUTSIDE = [OTHERS, STOLEN];

const log = (line: string) => process.stdout.write(`${line}\n`);
const ms = (n: number) => `${n.toFixed(1)} ms`;
const rate = (n: number) => `${n.toFixed(0)}/s`;

/** A session body of 45,000 IQD with a unique reference id (so no create reconciles). */
function sessionBody(): string {
  return JSON.stringify({
    reference_id: `bench-${randomString(16)}`,
    amount: 45000,
    currency: 'IQD',
    line_items: [
      { label: 'Shirt', amount: 21000, quantity: 2, type: 'charge' },
      { label: 'Delivery', amount: 3000, type: 'shipping' },
    ],
    customer: { phone: '07701234567' },
    success_url: 'https://shop.example.com/done',
    metadata: { order: 'bench' },
  });
}

async function main(): Promise<void> {
  setLogLevel('silent');
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const env = await startBenchEnvironment('sessions', NAMESPACE, log);
  try {
    const settings = loadSettings({
      DATABASE_URL: env.databaseUrl,
      TEMPORAL_ADDRESS: env.temporalAddress,
      TEMPORAL_TASK_QUEUE: `bench-sessions-${randomString(6)}`,
      PUBLIC_BASE_URL: 'https://pay.example.com',
      CHECKOUT_RATE_LIMIT_PER_SECOND: '1000000', // the limiter still counts every request
      LOG_LEVEL: 'silent',
    });

    const { appDb, temporal } = await connectStack(env, NAMESPACE, settings.DATABASE_POOL_MAX);

    // As in production, the worker is a process of its own (`src/main/worker.ts`), and so is the
    // floor's: this process runs the API and the clients.
    log("Starting the worker and the floor's worker as child processes (they bundle their workflows)...");
    const floorQueue = `bench-floor-${randomString(6)}`;
    const logs = mkdtempSync(join(tmpdir(), 'svc-bench-sessions-logs-'));
    env.onClose(async () => rmSync(logs, { recursive: true, force: true }));
    const serviceEnv = {
      PATH: process.env.PATH,
      DATABASE_URL: env.databaseUrl,
      TEMPORAL_ADDRESS: env.temporalAddress,
      TEMPORAL_NAMESPACE: NAMESPACE,
      TEMPORAL_TASK_QUEUE: settings.TEMPORAL_TASK_QUEUE,
      PUBLIC_BASE_URL: settings.PUBLIC_BASE_URL,
      LOG_LEVEL: 'info', // the worker says "worker running" once it polls
      ...(await benchMetricsPorts()),
    };
    const children = [
      startTsChild('worker', 'src/main/worker.ts', serviceEnv, join(logs, 'worker.log')),
      startTsChild(
        'floor worker',
        'scripts/bench/noop-worker.ts',
        { ...serviceEnv, TEMPORAL_TASK_QUEUE: floorQueue },
        join(logs, 'floor-worker.log'),
      ),
    ];
    for (const [child, file] of [
      [children[0], 'worker.log'],
      [children[1], 'floor-worker.log'],
    ] as const) {
      await waitFor(child.name, async () => readFileSync(join(logs, file), 'utf8').includes('worker running'), {
        timeoutMs: 180_000,
        watched: [child],
      });
    }

    // BENCH_TELEMETRY=compare: an API process with telemetry off and one with it on, each with a
    // worker of its own on its own task queue. Off: no metrics server, no tracing. On: what
    // production runs, metrics served (ports of its own) and traces sampled at 10 %.
    const telemetry = compareTelemetry ? await startTelemetryPair() : undefined;
    async function startTelemetryPair() {
      const sink = await startOtlpSink();
      env.onClose(sink.close);
      const quiet = { LOG_LEVEL: 'warn', HOST: '127.0.0.1', CHECKOUT_RATE_LIMIT_PER_SECOND: '1000000' };
      const sides = {
        off: {
          ...serviceEnv,
          METRICS_PORT: 'off',
          WORKER_METRICS_PORT: 'off',
          TEMPORAL_TASK_QUEUE: `${settings.TEMPORAL_TASK_QUEUE}-off`,
        },
        on: {
          ...serviceEnv,
          ...(await benchMetricsPorts()),
          ...sink.env,
          TEMPORAL_TASK_QUEUE: `${settings.TEMPORAL_TASK_QUEUE}-on`,
        },
      };
      const worker = async (side: 'off' | 'on') => {
        const logFile = join(logs, `worker-telemetry-${side}.log`);
        const child = startTsChild(`worker, telemetry ${side}`, 'src/main/worker.ts', sides[side], logFile);
        await waitFor(child.name, async () => readFileSync(logFile, 'utf8').includes('worker running'), {
          timeoutMs: 180_000,
          watched: [child],
        });
      };
      await Promise.all([worker('off'), worker('on')]);
      const api = async (side: 'off' | 'on') => {
        const name = `api-telemetry-${side}`;
        const port = await freePort();
        const child = startTsChild(
          name,
          'src/main/api.ts',
          { ...sides[side], ...quiet, PORT: String(port) },
          join(logs, `${name}.log`),
        );
        const url = `http://127.0.0.1:${port}`;
        await waitFor(name, async () => (await fetch(`${url}/partner/v1/health`).catch(() => null))?.ok === true, {
          timeoutMs: 120_000,
          watched: [child],
        });
        return url;
      };
      return { sink, off: await api('off'), on: await api('on') };
    }

    const http = createApp({ db: appDb, settings, clock: systemClock, temporal }).listen(0, '127.0.0.1');
    await new Promise((resolve) => http.once('listening', resolve));
    env.onClose(() => new Promise((resolve) => http.close(resolve)));
    const baseUrl = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;

    const merchant = await createMerchant(appDb, {
      name: 'Bench merchant',
      returnHosts: ['shop.example.com'],
      methods: ['test', 'cashondelivery'],
      testMerchant: true,
    });
    const { key } = await createCheckoutKey(appDb, {
      merchantId: merchant.merchant_id,
      mode: 'test',
      type: 'secret',
      scopes: [...checkoutScopes],
    });

    const client = benchHttpClient(CONCURRENCY);
    env.onClose(async () => client.close());
    const createAt = (url: string) => async () => {
      const { status, text } = await client.request(`${url}/v1/checkout/sessions`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          'idempotency-key': `bench_${randomString(24)}`,
        },
        body: sessionBody(),
      });
      if (status !== 201) throw new Error(`POST /v1/checkout/sessions answered ${status}: ${text}`);
    };
    const createSession = createAt(baseUrl);
    const startNoop = async () => {
      await temporal.workflow.start('benchNoopWorkflow', {
        workflowId: `bench-noop-${randomString(20)}`,
        taskQueue: floorQueue,
      });
    };

    log(`Warming up (${WARMUP} of each)...`);
    await runClosedLoop(WARMUP, CONCURRENCY, startNoop);
    await runClosedLoop(WARMUP, CONCURRENCY, createSession);
    if (telemetry) {
      await runClosedLoop(WARMUP, CONCURRENCY, createAt(telemetry.off));
      await runClosedLoop(WARMUP, CONCURRENCY, createAt(telemetry.on));
    }

    log(`Measuring ${ROUNDS} alternating rounds of ${PER_ROUND} each at concurrency ${CONCURRENCY}...`);
    const floorBatches: Batch[] = [];
    const sessionBatches: Batch[] = [];
    const telemetryBatches = { off: [] as Batch[], on: [] as Batch[] };
    // CPU seconds per process group in each phase, to show where a create costs more than a start.
    const cpuGroups: CpuGroups = {
      ...temporalCpuGroups(env.temporal),
      'workers (session worker and floor worker)': async () => children.map((c) => c.pid!),
      'Postgres (bench database backends)': () => databaseBackends(appDb),
    };
    const cpu = { floor: new Map<string, number>(), sessions: new Map<string, number>() };
    // The Temporal server's state transitions in each phase.
    const transitions = { floor: 0, sessions: 0 };
    const metered = async (phase: 'floor' | 'sessions', run: () => Promise<Batch>): Promise<Batch> => {
      const meter = await meterCpu(cpuGroups, 'this process (API and clients)', OTHERS);
      const transitionMeter = await meterTransitions(env.temporal);
      const batch = await run();
      for (const [name, seconds] of await meter.stop()) cpu[phase].set(name, (cpu[phase].get(name) ?? 0) + seconds);
      transitions[phase] += (await transitionMeter.stop()) ?? 0;
      return batch;
    };
    for (let round = 0; round < ROUNDS; round++) {
      floorBatches.push(await metered('floor', () => runClosedLoop(PER_ROUND, CONCURRENCY, startNoop)));
      sessionBatches.push(await metered('sessions', () => runClosedLoop(PER_ROUND, CONCURRENCY, createSession)));
      log(
        `  round ${round + 1}: floor ${rate(perSecond(floorBatches[round]))}, sessions ${rate(perSecond(sessionBatches[round]))}`,
      );
      if (!telemetry) continue;
      // Off and on in turn, each first in every other round.
      const sides = round % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const);
      for (const side of sides)
        telemetryBatches[side].push(await runClosedLoop(PER_ROUND, CONCURRENCY, createAt(telemetry[side])));
      const [off, on] = [telemetryBatches.off[round], telemetryBatches.on[round]];
      log(`           telemetry off ${rate(perSecond(off))}, on ${rate(perSecond(on))}`);
    }
    const floor = combine(floorBatches);
    const sessions = combine(sessionBatches);
    const ratio = perSecond(sessions) / perSecond(floor);
    const medianRatio = percentile(sessions.latenciesMs, 50) / percentile(floor.latenciesMs, 50);
    const created = await appDb('checkout_sessions').count<{ count: string }[]>({ count: '*' });

    log('');
    log(
      table([
        ['figure', 'value', 'floor', 'ratio', 'target', 'result'],
        [
          'sessions created per second',
          rate(perSecond(sessions)),
          rate(perSecond(floor)),
          `${ratio.toFixed(2)}x`,
          `>= ${TARGET_RATIO}x`,
          ratio >= TARGET_RATIO ? 'pass' : 'FAIL',
        ],
        [
          'create latency, median',
          ms(percentile(sessions.latenciesMs, 50)),
          ms(percentile(floor.latenciesMs, 50)),
          `${medianRatio.toFixed(2)}x`,
          `<= ${TARGET_MEDIAN_RATIO}x`,
          medianRatio <= TARGET_MEDIAN_RATIO ? 'pass' : 'FAIL',
        ],
        [
          'create latency, p95',
          ms(percentile(sessions.latenciesMs, 95)),
          ms(percentile(floor.latenciesMs, 95)),
          `${(percentile(sessions.latenciesMs, 95) / percentile(floor.latenciesMs, 95)).toFixed(2)}x`,
          '-',
          '-',
        ],
      ]),
    );
    if (telemetry) {
      const off = combine(telemetryBatches.off);
      const on = combine(telemetryBatches.on);
      // Throughput lost, latency added, with telemetry on (negative: within noise, it did better).
      const pct = (x: number) => `${(x * 100).toFixed(1)} %`;
      log(
        `\nTelemetry (API and worker processes of their own; "off": no metrics, no tracing; "on": metrics served, traces over OTLP/HTTP, ${SAMPLED * 100} % sampled):`,
      );
      log(
        table([
          ['figure', 'telemetry off', 'telemetry on', 'cost'],
          [
            'sessions created per second',
            rate(perSecond(off)),
            rate(perSecond(on)),
            pct(1 - perSecond(on) / perSecond(off)),
          ],
          [
            'create latency, median',
            ms(percentile(off.latenciesMs, 50)),
            ms(percentile(on.latenciesMs, 50)),
            pct(percentile(on.latenciesMs, 50) / percentile(off.latenciesMs, 50) - 1),
          ],
          [
            'create latency, p95',
            ms(percentile(off.latenciesMs, 95)),
            ms(percentile(on.latenciesMs, 95)),
            pct(percentile(on.latenciesMs, 95) / percentile(off.latenciesMs, 95) - 1),
          ],
        ]),
      );
      const { exports, bytes } = telemetry.sink.received();
      log(`OTLP sink: ${exports} exports, ${(bytes / 1024).toFixed(0)} KB.`);
    }
    const perOp = (seconds: number | undefined, count: number) => `${(((seconds ?? 0) * 1000) / count).toFixed(1)} ms`;
    const total = (m: Map<string, number>) =>
      [...m].filter(([name]) => !OUTSIDE.includes(name)).reduce((sum, [, seconds]) => sum + seconds, 0);
    const row = (name: string) => [
      name,
      perOp(cpu.sessions.get(name), sessions.count),
      perOp(cpu.floor.get(name), floor.count),
    ];
    log('\nCPU per operation (user + system):');
    log(
      table([
        ['process', 'per create', 'per floor start'],
        ...[...cpu.sessions.keys()].filter((name) => !OUTSIDE.includes(name)).map(row),
        ['all', perOp(total(cpu.sessions), sessions.count), perOp(total(cpu.floor), floor.count)],
        ...OUTSIDE.map(row),
      ]),
    );
    for (const [what, n, batch] of [
      ['Creates', transitions.sessions, sessions],
      ['Bare starts (floor)', transitions.floor, floor],
    ] as const) {
      const line = transitionsLine(env.temporal, what, n, batch.count, batch.wallMs / 1000);
      if (line) log(line);
    }
    log(
      `load average at the end: ${loadavg()
        .map((n) => n.toFixed(1))
        .join(', ')}`,
    );
    const version = (await appDb.raw('SHOW server_version')).rows[0].server_version;
    log(
      `\nfloor: bare starts of an empty workflow (run by a worker) on the same server at the same concurrency.` +
        `\n${sessions.count} measured creates (${Number(created[0].count)} sessions in all), ${CONCURRENCY} concurrent; ` +
        `${env.temporal.label}; Node ${process.version}, Postgres ${version}, ${cpus().length} CPUs, ` +
        `load average at the end ${loadavg()
          .map((n) => n.toFixed(2))
          .join(' ')}.`,
    );
    if (STRICT && (ratio < TARGET_RATIO || medianRatio > TARGET_MEDIAN_RATIO)) process.exitCode = 1;
  } finally {
    await env.close();
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
