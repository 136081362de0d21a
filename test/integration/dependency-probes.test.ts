import { freePort } from '../../scripts/processes';
import { createDb } from '../../src/db/knex';
import { readStatus } from '../../src/ops/status';
import { startLink, type Link } from '../helpers/link';
import { ownDatabase, startService, untilStatus, type ServiceProcess } from '../helpers/services';
import { startTestDevServer } from '../helpers/stack';

/**
 * What the service says about a fault (issue 33, item 5): an API process (the real entry point)
 * reaches Postgres and Temporal through loopback links the test breaks. Its /readyz names the
 * failing dependency and why, its probe gauges flip, one log line names each flip, and
 * `ops status` reads that view from its metrics port, and answers within its deadlines itself
 * while Postgres refuses connections.
 */
jest.setTimeout(180_000);

let database: Awaited<ReturnType<typeof ownDatabase>>;
let temporal: Awaited<ReturnType<typeof startTestDevServer>>;
let postgresLink: Link;
let temporalLink: Link;
let api: ServiceProcess;
let metricsUrl: string;

const PROBE_INTERVAL_MS = 300;
const QUERY_TIMEOUT_MS = 1000;

beforeAll(async () => {
  [database, temporal] = await Promise.all([ownDatabase(), startTestDevServer()]);
  const url = new URL(database.url);
  [postgresLink, temporalLink] = await Promise.all([
    startLink(`${url.hostname}:${url.port || 5432}`),
    startLink(temporal.address),
  ]);
  url.host = postgresLink.address;
  const [apiPort, metricsPort] = await Promise.all([freePort(), freePort()]);
  metricsUrl = `http://127.0.0.1:${metricsPort}`;
  api = startService('api', {
    DATABASE_URL: url.toString(),
    TEMPORAL_ADDRESS: temporalLink.address,
    HOST: '127.0.0.1',
    PORT: String(apiPort),
    METRICS_HOST: '127.0.0.1',
    METRICS_PORT: String(metricsPort),
    PUBLIC_BASE_URL: `http://127.0.0.1:${apiPort}`,
    DEPENDENCY_PROBE_INTERVAL_MS: String(PROBE_INTERVAL_MS),
    DB_STATEMENT_TIMEOUT_MS: '500',
    DB_QUERY_TIMEOUT_MS: String(QUERY_TIMEOUT_MS),
    DB_CONNECT_TIMEOUT_MS: '1000',
    TEMPORAL_CALL_TIMEOUT_MS: '1000',
    // One process ahead of Postgres by 90 s, as a host with a broken time service would be.
    LD_PRELOAD: '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1',
    FAKETIME: '+90s',
    FAKETIME_DONT_FAKE_MONOTONIC: '1',
    FAKETIME_NO_CACHE: '1',
  });
  await untilStatus(`${metricsUrl}/readyz`, 200);
}, 180_000);

afterAll(async () => {
  await api?.stop();
  await Promise.all([postgresLink?.close(), temporalLink?.close()]);
  await Promise.all([temporal?.stop(), database?.drop()]);
});

interface Readyz {
  status: string;
  checks: Array<{ name: string; ok: boolean; required?: false; detail?: string }>;
}

async function readyz(): Promise<{ code: number; body: Readyz }> {
  const res = await fetch(`${metricsUrl}/readyz`);
  return { code: res.status, body: (await res.json()) as Readyz };
}

/** The value of a sample of the API's /metrics (`name{labels}` as printed), or undefined. */
async function gauge(series: string): Promise<number | undefined> {
  const text = await (await fetch(`${metricsUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** Polls `read` until `ok` holds of its value (real time, 20 s at most); returns that value. */
async function until<T>(read: () => Promise<T>, ok: (value: T) => boolean): Promise<T> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const value = await read();
    if (ok(value)) return value;
    if (Date.now() > deadline) throw new Error(`gave up waiting; last: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The API's JSON log lines whose message starts with `prefix`. */
function logLines(prefix: string): Array<Record<string, unknown>> {
  return api
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => typeof l.msg === 'string' && l.msg.startsWith(prefix));
}

const UP = 'svc_dependency_up{dependency="postgres"}';
const TEMPORAL_UP = 'svc_dependency_up{dependency="temporal"}';
const UNREACHABLE = 'svc_dependency_unreachable_seconds{dependency="postgres"}';

describe('an API process', () => {
  it('is ready with both dependencies up, and measures its clock 90 s ahead of Postgres', async () => {
    expect(await readyz()).toEqual({
      code: 200,
      body: {
        status: 'ready',
        checks: [
          { name: 'postgres', ok: true },
          { name: 'temporal', ok: true },
          { name: 'search_attributes', ok: true },
        ],
      },
    });
    expect(await gauge(UP)).toBe(1);
    expect(await gauge(TEMPORAL_UP)).toBe(1);
    const skew = (await gauge('svc_clock_skew_seconds'))!;
    expect(skew).toBeGreaterThan(89);
    expect(skew).toBeLessThan(91);
  });

  it('names Postgres refusing connections in /readyz (503), flips its gauge, and logs the flip once each way', async () => {
    await postgresLink.refuse();
    try {
      const down = await until(readyz, (r) => r.code === 503);
      expect(down.body).toEqual({
        status: 'not_ready',
        checks: expect.arrayContaining([{ name: 'postgres', ok: false, detail: 'connection refused (ECONNREFUSED)' }]),
      });
      expect(JSON.stringify(down.body)).not.toMatch(/postgres:\/\/|\n\s+at /);
      expect(
        await until(
          () => gauge(UP),
          (v) => v === 0,
        ),
      ).toBe(0);
      const unreachable = (await gauge(UNREACHABLE))!;
      // Several probes fail while it lasts; one line says so.
      await new Promise((r) => setTimeout(r, PROBE_INTERVAL_MS * 4));
      // The seconds since a probe last answered keep growing (read at scrape time).
      expect((await gauge(UNREACHABLE))! - unreachable).toBeGreaterThanOrEqual((PROBE_INTERVAL_MS * 4) / 1000 - 0.2);
      expect(logLines('dependency down: postgres')).toEqual([
        expect.objectContaining({
          level: 'warn',
          dependency: 'postgres',
          deadline: 'DB_QUERY_TIMEOUT_MS',
          deadline_ms: QUERY_TIMEOUT_MS,
          error_class: 'connection_refused',
          detail: 'connection refused (ECONNREFUSED)',
        }),
      ]);
    } finally {
      await postgresLink.heal();
    }
    expect((await until(readyz, (r) => r.code === 200)).body.status).toBe('ready');
    expect(await gauge(UP)).toBe(1);
    expect(await gauge(UNREACHABLE)).toBe(0);
    expect(logLines('dependency up: postgres')).toEqual([
      expect.objectContaining({ level: 'info', dependency: 'postgres', down_ms: expect.any(Number) }),
    ]);
  });

  it('names a silent Postgres path by the deadline it passed', async () => {
    postgresLink.blackhole();
    try {
      const down = await until(readyz, (r) => r.code === 503);
      const postgres = down.body.checks.find((c) => c.name === 'postgres');
      expect(postgres).toEqual({
        name: 'postgres',
        ok: false,
        detail: expect.stringMatching(/DB_QUERY_TIMEOUT_MS\)$/),
      });
      expect(logLines('dependency down: postgres').at(-1)).toMatchObject({ error_class: 'deadline' });
    } finally {
      await postgresLink.refuse(); // cut the connections whose bytes were dropped
      await postgresLink.heal();
    }
    await until(readyz, (r) => r.code === 200);
  });

  it('stays in rotation while Temporal refuses (200 degraded, naming it), and is ready again after', async () => {
    await temporalLink.refuse();
    try {
      const degraded = await until(readyz, (r) => r.body.status === 'degraded');
      expect(degraded).toEqual({
        code: 200,
        body: {
          status: 'degraded',
          checks: [
            { name: 'postgres', ok: true },
            {
              name: 'temporal',
              ok: false,
              required: false,
              // Refused at once, or (gRPC waiting for its reconnect) no answer by the deadline.
              detail: expect.stringMatching(
                /^(connection refused \(ECONNREFUSED\)|unavailable: .+|no answer within (1000 ms|its deadline) \(TEMPORAL_CALL_TIMEOUT_MS\))$/,
              ),
            },
          ],
        },
      });
      expect(
        await until(
          () => gauge(TEMPORAL_UP),
          (v) => v === 0,
        ),
      ).toBe(0);
      expect(logLines('dependency down: temporal')).toEqual([
        expect.objectContaining({ dependency: 'temporal', deadline: 'TEMPORAL_CALL_TIMEOUT_MS', deadline_ms: 1000 }),
      ]);
    } finally {
      await temporalLink.heal();
    }
    expect((await until(readyz, (r) => r.body.status === 'ready')).code).toBe(200);
    expect(await gauge(TEMPORAL_UP)).toBe(1);
  });
});

describe('ops status', () => {
  it("shows each process's view of its dependencies and its clock skew", async () => {
    const nobody = `http://127.0.0.1:${await freePort()}`;
    const status = await readStatus(database.db, undefined, {
      namespace: 'default',
      postgresDeadlineMs: 2000,
      temporalDeadlineMs: 1000,
      processes: [metricsUrl, nobody],
    });
    expect(status.dependencies[0]).toMatchObject({ dependency: 'postgres', ok: true, detail: null });
    expect(Math.abs(status.clock_skew_seconds!)).toBeLessThan(1);
    expect(status.processes).toEqual([
      {
        url: metricsUrl,
        role: 'api',
        status: 'ready',
        postgres: 'up',
        temporal: 'up',
        clock_skew_seconds: expect.any(Number),
        detail: null,
      },
      expect.objectContaining({
        url: nobody,
        status: 'unreachable',
        detail: expect.stringMatching(/ECONNREFUSED/),
      }),
    ]);
    expect(status.processes[0].clock_skew_seconds).toBeGreaterThan(89);
  });

  it('answers within its deadlines while Postgres refuses connections, naming it', async () => {
    const port = await freePort();
    const db = createDb(`postgres://postgres@127.0.0.1:${port}/postgres`, 2);
    try {
      const started = Date.now();
      await postgresLink.refuse();
      const status = await readStatus(db, undefined, {
        namespace: 'default',
        postgresDeadlineMs: 2000,
        temporalDeadlineMs: 1000,
        processes: [metricsUrl],
      });
      expect(Date.now() - started).toBeLessThan(5000);
      expect(status).toMatchObject({
        dependencies: [
          {
            dependency: 'postgres',
            ok: false,
            deadline: 'DB_QUERY_TIMEOUT_MS 2000 ms',
            detail: 'connection refused (ECONNREFUSED)',
          },
          { dependency: 'temporal', ok: false, detail: 'no Temporal connection' },
        ],
        clock_skew_seconds: null,
        backlogs: null,
        webhook_endpoints: null,
        sessions_processing: null,
      });
      expect(status.processes[0]).toMatchObject({ url: metricsUrl, role: 'api', status: expect.any(String) });
    } finally {
      await postgresLink.heal();
      await db.destroy();
    }
  });
});
