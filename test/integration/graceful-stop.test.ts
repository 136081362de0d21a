import { Agent, request } from 'node:http';
import { connect } from 'node:net';
import type { Knex } from 'knex';
import { freePort } from '../../scripts/processes';
import { randomString } from '../../src/lib/ids';
import { apiStopBoundMs } from '../../src/main/stop';
import { workerStopBoundMs } from '../../src/worker/stop';
import { sessionBody } from '../helpers/checkout-payments';
import { buildMerchant } from '../helpers/factories';
import { call } from '../helpers/http';
import { startHttpsReceiver, type HttpsReceiver } from '../helpers/https-receiver';
import { startTestDevServer } from '../helpers/stack';
import { ownDatabase, startService, untilStatus, type ServiceProcess } from '../helpers/services';
import { until } from '../helpers/webhooks';

/**
 * Graceful stops of the real processes (`src/main/api.ts`, `src/main/worker.ts`) on a database of
 * their own and a Temporal dev server: SIGTERM with work in flight, every request answered, every
 * delivery recorded, exit 0 (issue 30, item 5).
 */
jest.setTimeout(300_000);

const DRAIN_MS = 3000;
const TIMEOUT_MS = 20_000;
const stopSettings = { SHUTDOWN_DRAIN_MS: DRAIN_MS, SHUTDOWN_TIMEOUT_MS: TIMEOUT_MS };
/** Beyond a stop's own bound (apiStopBoundMs, workerStopBoundMs): a margin for a loaded machine. */
const CLOSE_MARGIN_MS = 8000;

let database: Awaited<ReturnType<typeof ownDatabase>>;
let temporal: Awaited<ReturnType<typeof startTestDevServer>>;
let receiver: HttpsReceiver;
const services: ServiceProcess[] = [];

beforeAll(async () => {
  [database, temporal, receiver] = await Promise.all([ownDatabase(), startTestDevServer(), startHttpsReceiver()]);
}, 240_000);
afterAll(async () => {
  await Promise.all(services.map((s) => s.stop()));
  await Promise.all([receiver?.close(), temporal?.stop(), database?.drop()]);
});

/** Runs `test`; a failure carries the last log lines of every process the file started. */
async function withLogs(test: () => Promise<void>): Promise<void> {
  try {
    await test();
  } catch (err) {
    const logs = services.map((s, i) => `process ${i + 1}:\n${s.output().slice(-4000)}`).join('\n');
    if (err instanceof Error) err.message += `\n${logs}`;
    throw err;
  }
}

/** `process`'s exit code, or `still running` after `ms`. */
function exitWithin(process: ServiceProcess, ms: number): Promise<number | null | 'still running'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'still running'>((resolve) => (timer = setTimeout(() => resolve('still running'), ms)));
  return Promise.race([process.exited, late]).finally(() => clearTimeout(timer));
}

/** The settings every process of this file gets. */
const baseEnv = () => ({
  DATABASE_URL: database.url,
  TEMPORAL_ADDRESS: temporal.address,
  HOST: '127.0.0.1',
  METRICS_HOST: '127.0.0.1',
  WEBHOOK_EXTRA_CA_PATH: receiver.caPath,
  WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
  SHUTDOWN_DRAIN_MS: String(DRAIN_MS),
  SHUTDOWN_TIMEOUT_MS: String(TIMEOUT_MS),
  TEMPORAL_SDK_METRICS_PORT: 'off',
});

/** Starts the API on free ports and waits until it is ready. */
async function startApi() {
  const [port, metricsPort] = await Promise.all([freePort(), freePort()]);
  const process = startService('api', {
    ...baseEnv(),
    PORT: String(port),
    METRICS_PORT: String(metricsPort),
    PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
  });
  services.push(process);
  const api = { process, port, url: `http://127.0.0.1:${port}`, readyz: `http://127.0.0.1:${metricsPort}/readyz` };
  await untilStatus(api.readyz, 200);
  return api;
}

/** Starts a worker and waits until it polls. */
async function startWorker(env: Record<string, string> = {}) {
  const metricsPort = await freePort();
  const process = startService('worker', { ...baseEnv(), WORKER_METRICS_PORT: String(metricsPort), ...env });
  services.push(process);
  const readyz = `http://127.0.0.1:${metricsPort}/readyz`;
  await untilStatus(readyz, 200, 180_000);
  return { process, readyz };
}

/** One HTTP/1.1 exchange over `agent` (a keep-alive pool), with the `Connection` header fetch would hide. */
function exchange(
  agent: Agent,
  url: string,
  opts: { method?: string; headers?: Record<string, string>; body?: unknown } = {},
): Promise<{ status: number; connection: string | undefined; reusedSocket: boolean; body: any }> {
  return new Promise((resolve, reject) => {
    const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const req = request(
      url,
      {
        agent,
        method: opts.method ?? 'GET',
        headers: { ...opts.headers, ...(payload ? { 'content-type': 'application/json' } : {}) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () =>
          resolve({
            status: res.statusCode!,
            connection: res.headers.connection,
            reusedSocket: req.reusedSocket,
            body: text ? JSON.parse(text) : undefined,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** Resolves with the error code of a new TCP connection to `port` (`connected` if one opened). */
function connectOutcome(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

/** Until the API stops listening: the outcome of each connection attempt, every 50 ms. */
async function untilRefused(port: number, timeoutMs: number): Promise<void> {
  await until(
    () => connectOutcome(port),
    (o) => o === 'ECONNREFUSED',
    'the API to refuse connections',
    timeoutMs,
  );
}

/** The backends of this database waiting on a lock that `pid` holds. */
async function blockedBy(db: Knex, pid: number): Promise<number> {
  const { rows } = await db.raw(
    `SELECT count(*)::int AS n FROM pg_stat_activity WHERE ? = ANY(pg_blocking_pids(pid))`,
    [pid],
  );
  return rows[0].n;
}

describe('the API under SIGTERM', () => {
  it('answers every request in flight, serves through the drain with Connection: close, then refuses connections and exits 0', () =>
    withLogs(async () => {
      const api = await startApi();
      const m = await buildMerchant(database.db);
      const sessions: string[] = [];
      for (let i = 0; i < 4; i++) {
        const created = await call(api.url, 'POST', '/v1/checkout/sessions', {
          key: m.secretKey,
          body: sessionBody(),
          idempotencyKey: `idem_${randomString(16)}`,
        });
        expect(created.status).toBe(201);
        sessions.push(created.body.id);
      }
      // A keep-alive client with one connection open before the signal.
      const keepAlive = new Agent({ keepAlive: true, maxSockets: 1 });
      const before = await exchange(keepAlive, `${api.url}/partner/v1/health`);
      expect({ status: before.status, connection: before.connection }).toEqual({
        status: 200,
        connection: 'keep-alive',
      });

      // Four expires wait on the sessions' row locks, which this transaction holds: provably in flight.
      const lock = await database.db.transaction();
      try {
        await lock('checkout_sessions').whereIn('id', sessions).forUpdate().select('id');
        const { rows } = await lock.raw('SELECT pg_backend_pid() AS pid');
        const lockPid: number = rows[0].pid;
        const clients = sessions.map(() => new Agent({ keepAlive: true }));
        const inFlight = sessions.map((id, i) =>
          exchange(clients[i], `${api.url}/v1/checkout/sessions/${id}/expire`, {
            method: 'POST',
            headers: { authorization: `Bearer ${m.secretKey}` },
          }),
        );
        let answered = 0;
        for (const p of inFlight)
          void p.then(
            () => answered++,
            () => answered++,
          );
        await until(
          () => blockedBy(database.db, lockPid),
          (n) => n === 4,
          'the four expires to wait on the lock',
        );

        const signalledAt = Date.now();
        api.process.signal('SIGTERM');
        // Not ready as soon as the process has taken the signal, for the one reason.
        const ready = await untilStatus(api.readyz, 503, 2_000);
        expect(JSON.parse(ready.slice('503 '.length))).toEqual({
          status: 'not_ready',
          checks: [{ name: 'shutdown', ok: false, detail: 'draining' }],
        });
        // During the drain: still answered, on the kept-alive connection, which the answer closes.
        const during = await exchange(keepAlive, `${api.url}/partner/v1/health`);
        expect(during).toEqual({
          status: 200,
          connection: 'close',
          reusedSocket: true,
          body: { status: 'ok', api: 'partner', version: 'v1', currency: 'IQD' },
        });
        expect(Date.now() - signalledAt).toBeLessThan(DRAIN_MS);
        // An impatient second signal changes nothing (Node's default would end the process at once).
        api.process.signal('SIGINT');

        // After the drain: no new connection, while the four are still waiting on the lock.
        await untilRefused(api.port, DRAIN_MS + 10_000);
        expect(Date.now() - signalledAt).toBeGreaterThanOrEqual(DRAIN_MS);
        expect(answered).toBe(0);
        expect(await blockedBy(database.db, lockPid)).toBe(4);
        await until(
          async () => api.process.output(),
          (out) => out.includes('"stage":"stopped_accepting","in_flight":4'),
          'the API to log the four requests in flight as it stops accepting',
          5000,
        );

        await lock.commit();
        const answers = await Promise.all(inFlight);
        expect(
          answers.map((a) => ({ status: a.status, connection: a.connection, id: a.body.id, status_: a.body.status })),
        ).toEqual(sessions.map((id) => ({ status: 200, connection: 'close', id, status_: 'expired' })));
        const signalToAnswers = Date.now() - signalledAt;
        expect(await exitWithin(api.process, apiStopBoundMs(stopSettings) + CLOSE_MARGIN_MS - signalToAnswers)).toBe(0);
        expect(api.process.output()).toContain('api already stopping: SIGINT ignored');
        const stages = [...api.process.output().matchAll(/"stage":"([a-z_]+)"/g)].map((s) => s[1]);
        expect(stages).toEqual(['signal', 'draining', 'stopped_accepting', 'in_flight_left', 'closed', 'exit']);
        expect(api.process.output()).toMatch(/"stage":"in_flight_left","in_flight":4,"answered":4,"cut":0/);
        expect(await database.db('checkout_sessions').whereIn('id', sessions).pluck('status')).toEqual([
          'expired',
          'expired',
          'expired',
          'expired',
        ]);
      } finally {
        if (!lock.isCompleted()) await lock.rollback();
      }
    }));
});

/** A merchant's endpoint at `path` on the receiver, registered through the API, and its test events. */
async function receiverEndpoint(apiUrl: string, path: string) {
  const m = await buildMerchant(database.db);
  const endpoint = await call(apiUrl, 'POST', '/v1/webhook_endpoints', {
    key: m.secretKey,
    idempotencyKey: `idem_${randomString(16)}`,
    body: { url: `https://127.0.0.1:${receiver.port}${path}`, events: ['*'], mode: 'test' },
  });
  expect(endpoint.status).toBe(201);
  const endpointId: string = endpoint.body.id;
  return {
    endpointId,
    /** `POST /webhook_endpoints/{id}/test`; returns the event id. */
    async sendTest(): Promise<string> {
      const res = await call(apiUrl, 'POST', `/v1/webhook_endpoints/${endpointId}/test`, {
        key: m.secretKey,
        body: { type: 'checkout.session.completed' },
      });
      expect(res.status).toBe(202);
      return res.body.event_id;
    },
    /** The event ids the receiver got at `path`, in order. */
    posted: () => receiver.requests.filter((r) => r.path === path).map((r) => JSON.parse(r.body).id as string),
  };
}

describe('the worker under SIGTERM', () => {
  it('records the delivery in flight, claims nothing more and exits 0; the next worker delivers the rest', () =>
    withLogs(async () => {
      const api = await startApi();
      const first = await startWorker();
      const { endpointId, sendTest, posted } = await receiverEndpoint(api.url, '/held');
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      receiver.respond = () => ({ status: 200, until: released });

      try {
        const held = await sendTest();
        await receiver.waitFor(1, '/held', 60_000);
        first.process.signal('SIGTERM');
        const ready = await untilStatus(first.readyz, 503, 2_000);
        expect((JSON.parse(ready.slice('503 '.length)) as { checks: unknown }).checks).toEqual([
          { name: 'shutdown', ok: false, detail: 'draining' },
        ]);

        // A second event, queued while the first POST is held (the dispatcher runs on): the
        // stopping delivery, with slots free, must not take it.
        receiver.respond = () => ({ status: 200 });
        let exitedEarly: number | null | undefined;
        void first.process.exited.then((code) => (exitedEarly = code));
        const later = await sendTest();
        await until(
          async () => {
            if (exitedEarly !== undefined) throw new Error(`the worker exited (${exitedEarly}) with a POST in flight`);
            return database.db('events').where({ id: later }).first('dispatched_at');
          },
          (row) => Boolean(row?.dispatched_at),
          'the second event to be queued',
        );
        await new Promise((r) => setTimeout(r, 500));
        release();

        expect(await exitWithin(first.process, workerStopBoundMs(stopSettings) + CLOSE_MARGIN_MS)).toBe(0);
        expect(posted()).toEqual([held]);
        // The attempt in flight is recorded; its row left the queue; nothing is left claimed.
        expect(
          await database
            .db('event_deliveries')
            .where({ endpoint_id: endpointId })
            .select('event_id', 'attempt_no', 'status_code', 'error'),
        ).toEqual([{ event_id: held, attempt_no: 1, status_code: 200, error: null }]);
        expect(
          await database
            .db('webhook_queue')
            .where({ endpoint_id: endpointId })
            .select('event_id', 'attempt_no', 'claim'),
        ).toEqual([{ event_id: later, attempt_no: 1, claim: null }]);
        const stages = [...first.process.output().matchAll(/"stage":"([a-z_]+)"/g)].map((s) => s[1]);
        expect(stages.slice(0, 4)).toEqual(['signal', 'draining', 'stopped_accepting', 'in_flight_left']);
        expect(stages.slice(-2)).toEqual(['closed', 'exit']);

        // The endpoint's workflow runs its next delivery on the next worker: the second event, once.
        const second = await startWorker();
        await receiver.waitFor(2, '/held', 60_000);
        await until(
          () =>
            database.db('event_deliveries').where({ endpoint_id: endpointId }).orderBy('event_id').pluck('event_id'),
          (ids) => ids.length === 2,
          'the second delivery to be recorded',
        );
        expect(posted()).toEqual([held, later]);
        second.process.signal('SIGTERM');
        expect(await second.process.exited).toBe(0);
      } finally {
        release();
      }
      api.process.signal('SIGTERM');
      expect(await api.process.exited).toBe(0);
    }));

  it('gives up an activity still running past SHUTDOWN_TIMEOUT_MS and still exits 0 within its bound', () =>
    withLogs(async () => {
      const timeoutMs = 10_001; // the least the setting allows
      const api = await startApi();
      // Statements may wait on the lock below for longer than the bound (by default Postgres would cancel them at 5 s).
      const worker = await startWorker({ SHUTDOWN_TIMEOUT_MS: String(timeoutMs), DB_STATEMENT_TIMEOUT_MS: '60000' });
      const { endpointId, sendTest, posted } = await receiverEndpoint(api.url, '/stuck');
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      receiver.respond = () => ({ status: 200, until: released });
      // The endpoint's row locked here: recording the attempt (its failure clock) waits for this transaction.
      const lock = await database.db.transaction();
      try {
        await lock('webhook_endpoints').where({ id: endpointId }).forUpdate().first('id');
        const stuck = await sendTest();
        await receiver.waitFor(1, '/stuck', 60_000);
        const signalledAt = Date.now();
        worker.process.signal('SIGTERM');
        release();
        const boundMs = workerStopBoundMs({ SHUTDOWN_TIMEOUT_MS: timeoutMs });
        expect(await exitWithin(worker.process, boundMs + CLOSE_MARGIN_MS)).toBe(0);
        expect(Date.now() - signalledAt).toBeGreaterThanOrEqual(timeoutMs);
        expect(worker.process.output()).toContain(
          'worker gave up on activities still running past SHUTDOWN_TIMEOUT_MS',
        );
        expect(worker.process.output()).toContain('"stage":"exit","exit_code":0');
        expect(posted()).toEqual([stuck]);
      } finally {
        await lock.rollback();
        release();
      }
      // Given up, not lost: the claim lapses and a later batch sends the attempt again.
      expect(await database.db('event_deliveries').where({ endpoint_id: endpointId })).toEqual([]);
      expect(await database.db('webhook_queue').where({ endpoint_id: endpointId }).pluck('event_id')).toHaveLength(1);
      api.process.signal('SIGTERM');
      expect(await api.process.exited).toBe(0);
    }));
});
