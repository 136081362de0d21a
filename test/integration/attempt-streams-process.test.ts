import { freePort } from '../../scripts/processes';
import { createSession, payableBody, randomIp, shopper } from '../helpers/checkout-payments';
import { openStream, type OpenStream } from '../helpers/event-stream';
import { buildMerchant } from '../helpers/factories';
import { ownDatabase, startService, untilStatus, type ServiceProcess } from '../helpers/services';
import { startTestDevServer } from '../helpers/stack';

/**
 * Attempt event streams on the real API process (`src/main/api.ts`) with a database of its own and
 * a Temporal dev server: a thousand open streams hold one LISTEN connection, and SIGTERM ends them
 * all with `reconnect` at the start of the drain, so they do not hold the stop.
 */
jest.setTimeout(300_000);

const DRAIN_MS = 2000;
/** Long enough that a stream holding the stop would show: the process would still run after the drain. */
const TIMEOUT_MS = 60_000;
/**
 * Beyond the drain: a margin for a loaded machine to write `reconnect` to a thousand streams and
 * close them (as graceful-stop's CLOSE_MARGIN_MS), far below TIMEOUT_MS, which a stream holding
 * the stop would reach.
 */
const CLOSE_MARGIN_MS = 8000;
const STREAMS = Number(process.env.ATTEMPT_STREAMS ?? 1000);

let database: Awaited<ReturnType<typeof ownDatabase>>;
let temporal: Awaited<ReturnType<typeof startTestDevServer>>;
let api: ServiceProcess | undefined;

beforeAll(async () => {
  [database, temporal] = await Promise.all([ownDatabase(), startTestDevServer()]);
}, 240_000);
afterAll(async () => {
  await api?.stop();
  await Promise.all([temporal?.stop(), database?.drop()]);
});

it(`holds ${STREAMS} streams on one LISTEN connection and ends them all at SIGTERM, exiting 0 within the drain`, async () => {
  const [port, metricsPort] = await Promise.all([freePort(), freePort()]);
  const url = `http://127.0.0.1:${port}`;
  api = startService('api', {
    DATABASE_URL: database.url,
    TEMPORAL_ADDRESS: temporal.address,
    HOST: '127.0.0.1',
    PORT: String(port),
    METRICS_HOST: '127.0.0.1',
    METRICS_PORT: String(metricsPort),
    PUBLIC_BASE_URL: url,
    TRUST_PROXY: '1',
    SHUTDOWN_DRAIN_MS: String(DRAIN_MS),
    SHUTDOWN_TIMEOUT_MS: String(TIMEOUT_MS),
  });
  try {
    await untilStatus(`http://127.0.0.1:${metricsPort}/readyz`, 200);
    const m = await buildMerchant(database.db);
    const s = await createSession({ baseUrl: url }, m.secretKey, payableBody());
    const started = await shopper({ baseUrl: url }, m.publishableKey)('POST', `/sessions/${s.code}/attempts`, {
      body: { method: 'test' },
    });
    expect(started.status).toBe(201);
    const attemptId: string = started.body.attempt_id;
    // Pressed, so no stream's read sends a verify (there is no worker here: the attempt stays pending).
    const decided = await shopper({ baseUrl: url }, m.publishableKey)('POST', `/test-gateway/${attemptId}/decide`, {
      body: { decision: 'slow' },
    });
    expect(decided.status).toBe(200);

    const streams: OpenStream[] = [];
    for (let i = 0; i < STREAMS; i += 100) {
      const batch = Array.from({ length: Math.min(100, STREAMS - i) }, () =>
        openStream(`${url}/v1/public/sessions/${s.code}/attempts/${attemptId}/stream`, {
          authorization: `Bearer ${m.publishableKey}`,
          'x-forwarded-for': randomIp(),
        }),
      );
      streams.push(...(await Promise.all(batch)));
    }
    expect(streams.filter((st) => st.status !== 200).length).toBe(0);
    await Promise.all(streams.map((st) => st.nth(1, 60_000)));
    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(metrics).toMatch(new RegExp(`^svc_checkout_attempt_streams_open ${STREAMS}$`, 'm'));
    const { rows } = await database.db.raw(
      `SELECT query, state FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'svc-api attempt-streams'`,
    );
    expect(rows).toEqual([{ query: 'LISTEN attempt_settled', state: 'idle' }]);

    const stopAt = Date.now();
    api.signal('SIGTERM');
    const ended = await Promise.all(streams.map((st) => st.ended(DRAIN_MS + CLOSE_MARGIN_MS)));
    expect(ended.every(Boolean)).toBe(true);
    expect(new Set(streams.map((st) => st.events.map((e) => e.event).join(',')))).toEqual(
      new Set(['attempt,reconnect']),
    );
    expect(await api.exited).toBe(0);
    // The drain and the close, not the 60 s bound of requests in flight.
    expect(Date.now() - stopAt).toBeLessThan(DRAIN_MS + CLOSE_MARGIN_MS);
  } finally {
    await api.stop();
  }
});
