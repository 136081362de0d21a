import { cpus } from 'node:os';
import { Client as TemporalClient, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { recordEvent } from '../src/checkout/events';
import { loadSettings } from '../src/config';
import { createDb, migrateLatest } from '../src/db/knex';
import { systemClock } from '../src/lib/clock';
import { newId, randomString } from '../src/lib/ids';
import { setLogLevel } from '../src/lib/log';
import { createMerchant } from '../src/ops/merchants';
import type { WebhookDeps } from '../src/webhooks/deps';
import { startDispatcher } from '../src/webhooks/dispatcher';
import { createEndpoint } from '../src/webhooks/endpoints';
import { webhookRuntime } from '../src/webhooks/runtime';
import { DELIVERY_TIMEOUT_MS } from '../src/webhooks/schedule';
import { deliveryAgent, postWebhook } from '../src/webhooks/send';
import { signatureHeader } from '../src/webhooks/signing';
import { checkWebhookUrl } from '../src/webhooks/url-safety';
import { verify } from '../src/webhooks/verify';
import { createWorker } from '../src/worker/create-worker';
import { RECEIVER_HOST, startHttpsReceiver, testResolver } from '../test/helpers/https-receiver';
import { startBenchEnvironment } from './bench/environment';
import { percentile, runClosedLoop, table } from './bench/measure';

/**
 * `npm run bench:webhooks`: 5,000 events, each committed by its own transaction the way a state
 * change records it, fanned out to 5 endpoints on an HTTPS receiver on loopback (self-signed
 * certificate, host on the allow-list): the real dispatcher (LISTEN/NOTIFY and sweep), the real
 * delivery workflows and activities on a `temporal server start-dev` of its own, a database of its
 * own. Prints deliveries per second and the median and p95 time from an event's commit to the
 * receiver's first byte (its request headers arriving): for the 5,000 committed as fast as 8
 * producers can (a burst: throughput, and latency with a backlog), then for 1,000 more committed
 * at a steady 40 per second (latency without one). Beside them, the floor: the same signed POST
 * sent straight to the receiver, 50 at once (no Postgres, no Temporal).
 *
 * Everything runs in this one process (producers, dispatcher, worker, receiver). Uses DATABASE_URL's
 * server (a database `svc_bench_<ts>` is created and dropped), or an embedded Postgres when unset.
 * BENCH_EVENTS, BENCH_ENDPOINTS, BENCH_PRODUCERS, BENCH_PACED_EVENTS, BENCH_PACED_RATE and
 * BENCH_WARMUP change the sizes.
 */

const EVENTS = Number(process.env.BENCH_EVENTS ?? 5000);
const ENDPOINTS = Number(process.env.BENCH_ENDPOINTS ?? 5);
const PRODUCERS = Number(process.env.BENCH_PRODUCERS ?? 8);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 200);
const PACED_EVENTS = Number(process.env.BENCH_PACED_EVENTS ?? 1000);
const PACED_RATE = Number(process.env.BENCH_PACED_RATE ?? 40);
/** Attempts in flight per endpoint workflow (workflows/delivery.ts), so the floor sends as many at once. */
const IN_FLIGHT_PER_ENDPOINT = 10;
const NAMESPACE = 'default';
const DELIVERY_DEADLINE_MS = 10 * 60_000;

const log = (line: string) => process.stdout.write(`${line}\n`);
const ms = (n: number) => `${n.toFixed(1)} ms`;
const rate = (n: number) => `${n.toFixed(0)}/s`;
const sleep = (n: number) => new Promise((r) => setTimeout(r, n));

async function main(): Promise<void> {
  setLogLevel('silent');
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const env = await startBenchEnvironment('webhooks', NAMESPACE, log);
  try {
    const receiver = await startHttpsReceiver();
    env.onClose(() => receiver.close());
    const settings = loadSettings({
      DATABASE_URL: env.databaseUrl,
      TEMPORAL_ADDRESS: env.temporalAddress,
      TEMPORAL_TASK_QUEUE: `bench-webhooks-${randomString(6)}`,
      WEBHOOK_ALLOWED_HOSTS: RECEIVER_HOST,
      WEBHOOK_EXTRA_CA_PATH: receiver.caPath,
      LOG_LEVEL: 'silent',
    });
    // receiver.webhooks.test resolves to 127.0.0.1 through the tests' table resolver.
    const webhooks = webhookRuntime(settings, { resolve: testResolver });

    // State changes and the worker (activities and dispatcher) each get their own pool, as two processes would.
    const apiDb = createDb(settings.DATABASE_URL!, settings.DATABASE_POOL_MAX);
    const workerDb = createDb(settings.DATABASE_URL!, settings.DATABASE_POOL_MAX);
    env.onClose(() => Promise.all([apiDb.destroy(), workerDb.destroy()]));
    await migrateLatest(apiDb);

    const nativeConnection = await NativeConnection.connect({ address: env.temporalAddress });
    const connection = await Connection.connect({ address: env.temporalAddress });
    env.onClose(() => Promise.all([nativeConnection.close(), connection.close()]));
    const temporal = new TemporalClient({ connection, namespace: NAMESPACE });

    log('Bundling the workflows and starting the worker and the dispatcher...');
    const worker = await createWorker({
      connection: nativeConnection,
      namespace: NAMESPACE,
      taskQueue: settings.TEMPORAL_TASK_QUEUE,
      db: workerDb,
      clock: systemClock,
      publicBaseUrl: settings.PUBLIC_BASE_URL,
      webhooks,
    });
    const running = worker.run();
    env.onClose(async () => {
      worker.shutdown();
      await running;
    });
    const dispatcher = startDispatcher({
      db: workerDb,
      databaseUrl: settings.DATABASE_URL!,
      temporal,
      taskQueue: settings.TEMPORAL_TASK_QUEUE,
    });
    env.onClose(() => dispatcher.stop());

    const merchant = await createMerchant(apiDb, {
      name: 'Bench merchant',
      returnHosts: ['shop.example.com'],
      methods: ['test'],
      testMerchant: true,
    });
    const scope = { merchantId: merchant.merchant_id, mode: 'test' as const };
    const deps: WebhookDeps = {
      db: apiDb,
      clock: systemClock,
      temporal,
      taskQueue: settings.TEMPORAL_TASK_QUEUE,
      runtime: webhooks,
    };
    const secrets = new Map<string, string>();
    for (let i = 0; i < ENDPOINTS; i++) {
      const { endpoint, secret } = await createEndpoint(deps, scope, {
        url: receiver.url(`/endpoint-${i}`),
        events: ['*'],
        mode: 'test',
      });
      secrets.set(new URL(endpoint.url).pathname, secret);
    }

    /** Commits `count` events from PRODUCERS concurrent transactions; returns each one's commit time. */
    const produce = async (count: number) => {
      const committedAt = new Map<string, number>();
      await runClosedLoop(count, PRODUCERS, async () => {
        const event = await apiDb.transaction((trx) =>
          recordEvent(trx, {
            ...scope,
            type: 'checkout.session.completed',
            object: { id: newId('cs', 'test'), object: 'checkout.session', amount: 45000, currency: 'IQD' },
            now: new Date(),
          }),
        );
        committedAt.set(event.id, Date.now());
      });
      return committedAt;
    };
    /** Commits `count` events at `perSecond`, each on time whether or not the one before has committed. */
    const producePaced = async (count: number, perSecond: number) => {
      const committedAt = new Map<string, number>();
      const started = Date.now();
      const commits: Promise<void>[] = [];
      for (let i = 0; i < count; i++) {
        await sleep(Math.max(0, started + (i * 1000) / perSecond - Date.now()));
        commits.push(
          apiDb
            .transaction((trx) =>
              recordEvent(trx, {
                ...scope,
                type: 'checkout.session.completed',
                object: { id: newId('cs', 'test'), object: 'checkout.session', amount: 45000, currency: 'IQD' },
                now: new Date(),
              }),
            )
            .then((event) => void committedAt.set(event.id, Date.now())),
        );
      }
      await Promise.all(commits);
      return committedAt;
    };
    /** First request per (event, endpoint) among `committedAt`'s events, once all have arrived. */
    const firstBytes = async (committedAt: Map<string, number>) => {
      const expected = committedAt.size * ENDPOINTS;
      const deadline = Date.now() + DELIVERY_DEADLINE_MS;
      for (;;) {
        const first = new Map<string, (typeof receiver.requests)[number]>();
        for (const r of receiver.requests) {
          const id = r.headers['svc-event-id'] as string;
          if (committedAt.has(id) && !first.has(`${id} ${r.path}`)) first.set(`${id} ${r.path}`, r);
        }
        if (first.size >= expected) return first;
        if (Date.now() > deadline) throw new Error(`only ${first.size} of ${expected} deliveries arrived`);
        await sleep(100);
      }
    };

    log(`Warming up (${WARMUP} events)...`);
    await firstBytes(await produce(WARMUP));
    receiver.requests.length = 0;

    log(`Measuring ${EVENTS} events to ${ENDPOINTS} endpoints (${PRODUCERS} producers)...`);
    const startedAt = Date.now();
    const committedAt = await produce(EVENTS);
    const producedMs = Date.now() - startedAt;
    const first = await firstBytes(committedAt);
    const deliveries = [...first.values()];
    const lastByte = Math.max(...deliveries.map((r) => r.at));
    const latencies = deliveries.map((r) => r.at - committedAt.get(r.headers['svc-event-id'] as string)!);
    const perSecond = (deliveries.length / (lastByte - startedAt)) * 1000;
    await sleep(500);
    const measured = receiver.requests.filter((r) => committedAt.has(r.headers['svc-event-id'] as string));
    const invalid = measured.filter((r) => {
      try {
        verify(r.body, r.headers['svc-signature'] as string, secrets.get(r.path)!);
        return false;
      } catch {
        return true;
      }
    }).length;

    log(`Measuring ${PACED_EVENTS} events at ${PACED_RATE} per second...`);
    const pacedCommittedAt = await producePaced(PACED_EVENTS, PACED_RATE);
    const paced = [...(await firstBytes(pacedCommittedAt)).values()].map(
      (r) => r.at - pacedCommittedAt.get(r.headers['svc-event-id'] as string)!,
    );

    log(`Measuring the floor: ${deliveries.length} signed POSTs straight to the receiver...`);
    receiver.requests.length = 0;
    const agent = deliveryAgent(webhooks.extraCa);
    const check = await checkWebhookUrl(receiver.url('/floor'), webhooks);
    if (!check.ok) throw new Error(`the floor target is refused: ${check.issue}`);
    const body = JSON.stringify({ id: 'evt_test_floor', object: 'event', type: 'checkout.session.completed' });
    const sentAt: number[] = [];
    const floorStarted = Date.now();
    await runClosedLoop(deliveries.length, ENDPOINTS * IN_FLIGHT_PER_ENDPOINT, async (i) => {
      const headers = {
        'content-type': 'application/json',
        'svc-signature': signatureHeader(body, [secrets.values().next().value!], Math.floor(Date.now() / 1000)),
        'svc-event-id': `floor-${i}`,
        'svc-event-type': 'checkout.session.completed',
      };
      sentAt[i] = Date.now();
      const result = await postWebhook(check.target, body, headers, { agent, timeoutMs: DELIVERY_TIMEOUT_MS });
      if (result.error) throw new Error(`floor POST failed: ${result.error}`);
    });
    const floorLast = Math.max(...receiver.requests.map((r) => r.at));
    const floorRate = (receiver.requests.length / (floorLast - floorStarted)) * 1000;
    const floorLatencies = receiver.requests.map(
      (r) => r.at - sentAt[Number((r.headers['svc-event-id'] as string).slice(6))],
    );
    agent.destroy();

    log('');
    log(
      table([
        ['figure', 'value', 'floor', 'ratio'],
        ['deliveries per second', rate(perSecond), rate(floorRate), `${(perSecond / floorRate).toFixed(2)}x`],
        ...(
          [
            [`commit to first byte, ${PACED_RATE} events/s`, paced],
            ['commit to first byte, burst', latencies],
          ] as const
        ).flatMap(([label, values]) =>
          [50, 95].map((p) => [
            `${label}, ${p === 50 ? 'median' : 'p95'}`,
            ms(percentile([...values], p)),
            ms(percentile(floorLatencies, p)),
            `${(percentile([...values], p) / percentile(floorLatencies, p)).toFixed(1)}x`,
          ]),
        ),
      ]),
    );
    const version = (await apiDb.raw('SHOW server_version')).rows[0].server_version;
    log(
      `\n${EVENTS} events committed in ${(producedMs / 1000).toFixed(1)} s (${rate((EVENTS / producedMs) * 1000)}), ` +
        `${deliveries.length} first deliveries in ${((lastByte - startedAt) / 1000).toFixed(1)} s from the first commit; ` +
        `${measured.length - deliveries.length} repeated, ${invalid} with a signature the verify helper refused; ` +
        `then ${PACED_EVENTS} at ${PACED_RATE}/s (${PACED_EVENTS * ENDPOINTS} deliveries).` +
        `\nfloor: the same signed POST sent straight to the receiver, ${ENDPOINTS * IN_FLIGHT_PER_ENDPOINT} at once ` +
        `(time from sending to the receiver's first byte).` +
        `\nNode ${process.version}, Postgres ${version}, ${cpus().length} CPUs; producers, dispatcher, worker and receiver in one process.`,
    );
    if (invalid > 0 || measured.length !== deliveries.length) process.exitCode = 1;
  } finally {
    await env.close();
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
