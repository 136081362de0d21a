import Koa from 'koa';
import { createApp } from '../../src/app';
import { streamAttempt } from '../../src/checkout/attempts/attempt-stream';
import { AttemptStreamHub } from '../../src/checkout/attempts/attempt-stream-hub';
import { attemptStreamRules } from '../../src/checkout/attempts/attempt-stream-rules';
import { settleAttempt } from '../../src/checkout/attempts/transitions';
import { randomString } from '../../src/lib/ids';
import { attemptListenerReconnects, attemptNotifications, attemptStreamsOpen } from '../../src/telemetry/checkout';
import { openStream } from '../helpers/event-stream';
import { buildMerchant } from '../helpers/factories';
import { call } from '../helpers/http';
import { createSession, expectError, payableBody, randomIp, shopper, until } from '../helpers/checkout-payments';
import { listen, startStack, Stack } from '../helpers/stack';

/**
 * The attempt event streams (`GET …/attempts/{id}/stream`): the poll's answer pushed when the
 * attempt settles (a NOTIFY in the settling transaction, heard on one LISTEN connection per
 * process), the backstop for a settle that never notifies (the previous release's workers), a lost
 * LISTEN connection re-opened, the poll's refusals, the stop's drain, and a thousand streams on one
 * connection.
 */
jest.setTimeout(120_000);

let stack: Stack;
/** This file's API process, with a LISTEN connection pg_stat_activity can tell from other files'. */
let api: { baseUrl: string; close: () => Promise<void> };
let hub: AttemptStreamHub;
const appName = `svc-test-streams-${randomString(6)}`;

beforeAll(async () => {
  stack = await startStack();
  hub = new AttemptStreamHub({ db: stack.db, applicationName: appName });
  api = await listen(createApp({ ...stack.deps, attemptStreams: hub }));
});
afterAll(async () => {
  hub.drainStreams();
  await api.close();
  await hub.close();
  await stack.stop();
});

const metric = async (m: { get(): Promise<{ values: Array<{ value: number }> }> }) =>
  (await m.get()).values[0]?.value ?? 0;

/** The LISTEN connections of this file's API process. */
const listeners = async () =>
  (
    await stack.db.raw(
      `SELECT pid, query FROM pg_stat_activity WHERE application_name = ? AND query ILIKE 'LISTEN %'`,
      [appName],
    )
  ).rows as Array<{ pid: number; query: string }>;

async function merchant() {
  const m = await buildMerchant(stack.db, { name: `Shop ${randomString(6)}` });
  const ip = randomIp();
  return { ...m, ip, pub: shopper(api, m.publishableKey, ip) };
}
type M = Awaited<ReturnType<typeof merchant>>;

const streamOf = (m: M, path: string, headers: Record<string, string> = {}) =>
  openStream(`${api.baseUrl}/v1/public${path}`, {
    authorization: `Bearer ${m.publishableKey}`,
    'x-forwarded-for': m.ip,
    ...headers,
  });

/** A started test attempt (`over`: the session's body); `decision` pressed first when given. */
async function attempt(m: M, over: Record<string, unknown> = {}, decision?: string) {
  const s = await createSession(api, m.secretKey, payableBody(over));
  const res = await m.pub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test' } });
  expect(res.status).toBe(201);
  const id: string = res.body.attempt_id;
  if (decision) expect((await m.pub('POST', `/test-gateway/${id}/decide`, { body: { decision } })).status).toBe(200);
  return { s, id };
}

/** What 0.2.0's settle writes: the attempt failed and its session open again, without a NOTIFY. */
async function settleWithoutNotify(attemptId: string) {
  await stack.db.transaction(async (trx) => {
    const [a] = await trx('payment_attempts')
      .where({ id: attemptId, status: 'pending' })
      .update({
        status: 'failed',
        failure_reason: 'simulated_decline',
        resolved_at: new Date(),
        updated_at: new Date(),
      })
      .returning('*');
    await trx('checkout_sessions').where({ id: a.session_id, status: 'processing' }).update({ status: 'open' });
  });
}

describe('GET /v1/public/sessions/{code}/attempts/{attempt_id}/stream', () => {
  it('sends the poll at once, then the outcome when the worker settles the attempt (notified), and ends', async () => {
    const m = await merchant();
    const { s, id } = await attempt(m);
    const notified = await metric(attemptNotifications);
    // No button pressed: the stream's first read is the return page's verify, as the poll's is.
    const stream = await streamOf(m, `/sessions/${s.code}/attempts/${id}/stream`);
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(stream.headers.get('cache-control')).toBe('no-store');
    expect(stream.headers.get('x-request-id')).toMatch(/^req_/);
    const first = await stream.nth(1);
    expect(first).toEqual({ event: 'attempt', data: expect.objectContaining({ attempt_id: id, status: 'pending' }) });

    const outcome = await stream.nth(2);
    expect(await stream.ended()).toBe(true);
    const poll = await m.pub('GET', `/sessions/${s.code}/attempts/${id}`);
    expect(outcome).toEqual({ event: 'attempt', data: poll.body });
    expect(poll.body).toMatchObject({ status: 'succeeded', session_status: 'completed', payment_status: 'paid' });
    expect(stream.events).toHaveLength(2);
    expect(await metric(attemptNotifications)).toBeGreaterThan(notified);
  });

  it('sends a final attempt once and ends at once', async () => {
    const m = await merchant();
    const { s, id } = await attempt(m, { amount: 27001 }, 'failed');
    await until(async () => (await stack.db('payment_attempts').where({ id }).first()).status !== 'pending', 'settle');
    const stream = await streamOf(m, `/sessions/${s.code}/attempts/${id}/stream`);
    expect(await stream.ended()).toBe(true);
    const poll = await m.pub('GET', `/sessions/${s.code}/attempts/${id}`);
    expect(stream.events).toEqual([{ event: 'attempt', data: poll.body }]);
    expect(poll.body).toMatchObject({ status: 'failed', failure_reason: 'simulated_decline' });
  });

  it('hears an attempt settled without a NOTIFY (a 0.2.0 worker) within the backstop period', async () => {
    const m = await merchant();
    const { s, id } = await attempt(m, {}, 'slow');
    const stream = await streamOf(m, `/sessions/${s.code}/attempts/${id}/stream`);
    expect((await stream.nth(1)).data.status).toBe('pending');
    const at = Date.now();
    await settleWithoutNotify(id);
    // At the next backstop read (within its period and deadline), then the stream's own read.
    const bound = attemptStreamRules.backstopMs + attemptStreamRules.backstopTimeoutMs + 1000;
    const outcome = await stream.nth(2, bound + 1000);
    expect(Date.now() - at).toBeLessThanOrEqual(bound);
    expect(outcome.data).toMatchObject({ attempt_id: id, status: 'failed', session_status: 'open' });
    expect(await stream.ended()).toBe(true);
  });

  it('re-opens a lost LISTEN connection, counts it, and still hears the next settle', async () => {
    const m = await merchant();
    const { s, id } = await attempt(m, {}, 'slow');
    const stream = await streamOf(m, `/sessions/${s.code}/attempts/${id}/stream`);
    await stream.nth(1);
    const [before] = await listeners();
    const reconnects = await metric(attemptListenerReconnects);
    await stack.db.raw('SELECT pg_terminate_backend(?)', [before.pid]);
    await until(async () => (await metric(attemptListenerReconnects)) === reconnects + 1, 'the listener to reconnect');
    const after = await listeners();
    expect(after).toHaveLength(1);
    expect(after[0].pid).not.toBe(before.pid);

    const notified = await metric(attemptNotifications);
    await settleAttempt(stack.db, {
      attemptId: id,
      outcome: 'succeeded',
      expireIfDue: false,
      now: stack.clock(),
      publicBaseUrl: stack.settings.PUBLIC_BASE_URL,
    });
    expect((await stream.nth(2)).data).toMatchObject({ status: 'succeeded', session_status: 'completed' });
    // Other test files share the database (and its NOTIFYs): at least this settle's.
    expect(await metric(attemptNotifications)).toBeGreaterThan(notified);
    expect(await stream.ended()).toBe(true);
  });

  it('refuses as the poll does: 401 invalid_publishable_key, 404 session_not_found, 404 attempt_not_found', async () => {
    const m = await merchant();
    const { s, id } = await attempt(m, {}, 'slow');
    const headers = { 'x-forwarded-for': m.ip };
    const path = (code: string, attemptId: string) => `/v1/public/sessions/${code}/attempts/${attemptId}/stream`;
    expectError(await call(api.baseUrl, 'GET', path(s.code, id), { headers }), 401, 'invalid_publishable_key');
    const key = m.publishableKey;
    const other = await merchant();
    expectError(await call(api.baseUrl, 'GET', path('NOSUCHCODE1', id), { key, headers }), 404, 'session_not_found');
    expectError(
      await call(api.baseUrl, 'GET', path(s.code, 'pa_test_nope'), { key, headers }),
      404,
      'attempt_not_found',
    );
    // Another merchant's key finds neither the session nor the attempt.
    const lookup = `/v1/public/attempts/${id}/stream`;
    expectError(
      await call(api.baseUrl, 'GET', lookup, { key: other.publishableKey, headers }),
      404,
      'attempt_not_found',
    );
  });

  it("counts against the poll's per-IP window: 429 rate_limited with Retry-After once the polls used it up", async () => {
    const m = await merchant();
    const { s, id } = await attempt(m, {}, 'slow');
    const ip = randomIp();
    const polls = Array.from({ length: 300 }, () =>
      m.pub('GET', `/sessions/${s.code}/attempts/${id}`, { ip }).then((r) => r.status),
    );
    expect(new Set(await Promise.all(polls))).toEqual(new Set([200]));
    const res = await call(api.baseUrl, 'GET', `/v1/public/sessions/${s.code}/attempts/${id}/stream`, {
      key: m.publishableKey,
      headers: { 'x-forwarded-for': ip },
    });
    expectError(res, 429, 'rate_limited');
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
  });
});

describe('GET /v1/public/attempts/{attempt_id}/stream', () => {
  it('sends the lookup (merchant, locale, livemode) and its outcome', async () => {
    const m = await merchant();
    const { id } = await attempt(m, { amount: 27001 });
    const stream = await streamOf(m, `/attempts/${id}/stream`);
    expect((await stream.nth(1)).data).toMatchObject({ attempt_id: id, status: 'pending', livemode: false });
    const outcome = await stream.nth(2);
    expect(await stream.ended()).toBe(true);
    expect(outcome).toEqual({ event: 'attempt', data: (await m.pub('GET', `/attempts/${id}`)).body });
    expect(outcome.data).toMatchObject({ status: 'failed', failure_reason: 'simulated_decline', merchant: {} });
  });
});

describe('a read that fails', () => {
  /**
   * An app whose one route streams the attempt's row through `read`, which fails on the reads
   * `failing` picks (1: the first, which is the answer before anything is sent).
   */
  async function flakyStreams(failing: (read: number) => boolean) {
    const own = new AttemptStreamHub({ db: stack.db });
    const app = new Koa();
    let reads = 0;
    app.use(async (ctx) => {
      const attemptId = ctx.path.slice(1);
      await streamAttempt(ctx, own, async () => {
        reads += 1;
        if (failing(reads)) throw new Error('the pool is busy');
        const row = await stack.db('payment_attempts').where({ id: attemptId }).first('id', 'status');
        return { attempt_id: row.id as string, status: row.status as string };
      });
    });
    const server = await listen(app);
    return {
      open: (attemptId: string) => openStream(`${server.baseUrl}/${attemptId}`, {}),
      reads: () => reads,
      close: async () => {
        own.drainStreams();
        await server.close();
        await own.close();
      },
    };
  }

  it('leaves the stream open, and the backstop reads again and sends the outcome', async () => {
    const flaky = await flakyStreams((n) => n === 2);
    try {
      const m = await merchant();
      const { id } = await attempt(m, {}, 'slow');
      const stream = await flaky.open(id);
      expect((await stream.nth(1)).data).toEqual({ attempt_id: id, status: 'pending' });
      // No notification: the backstop's wake reads (and fails), the next one reads the outcome.
      const started = Date.now();
      await settleWithoutNotify(id);
      expect(await stream.ended(3 * attemptStreamRules.backstopMs + 5000)).toBe(true);
      expect(stream.events.map((e) => e.data.status)).toEqual(['pending', 'failed']);
      expect(flaky.reads()).toBeGreaterThanOrEqual(3);
      expect(Date.now() - started).toBeLessThan(2 * attemptStreamRules.backstopMs + 5000);
    } finally {
      await flaky.close();
    }
  });

  it(`ends the stream without an event after ${attemptStreamRules.readFailuresToEnd} failed reads in a row (the page polls)`, async () => {
    const flaky = await flakyStreams((n) => n > 1);
    try {
      const m = await merchant();
      const { id } = await attempt(m, {}, 'slow');
      const stream = await flaky.open(id);
      await stream.nth(1);
      await settleWithoutNotify(id);
      expect(await stream.ended((attemptStreamRules.readFailuresToEnd + 2) * attemptStreamRules.backstopMs)).toBe(true);
      expect(stream.events.map((e) => e.event)).toEqual(['attempt']);
      expect(flaky.reads()).toBe(1 + attemptStreamRules.readFailuresToEnd);
    } finally {
      await flaky.close();
    }
  });
});

describe('stopping', () => {
  it('ends every open stream with a reconnect event, and a later one right after its first event', async () => {
    const stopping = new AttemptStreamHub({ db: stack.db });
    const other = await listen(createApp({ ...stack.deps, attemptStreams: stopping }));
    try {
      const m = await merchant();
      const { id } = await attempt(m, {}, 'slow');
      const open = await openStream(`${other.baseUrl}/v1/public/attempts/${id}/stream`, {
        authorization: `Bearer ${m.publishableKey}`,
        'x-forwarded-for': m.ip,
      });
      await open.nth(1);
      stopping.drainStreams();
      expect(await open.ended()).toBe(true);
      expect(open.events.map((e) => e.event)).toEqual(['attempt', 'reconnect']);
      const later = await openStream(`${other.baseUrl}/v1/public/attempts/${id}/stream`, {
        authorization: `Bearer ${m.publishableKey}`,
        'x-forwarded-for': m.ip,
      });
      expect(await later.ended()).toBe(true);
      expect(later.events.map((e) => e.event)).toEqual(['attempt', 'reconnect']);
      expect(stopping.size).toBe(0);
    } finally {
      await other.close();
      await stopping.close();
    }
  });
});

describe('one LISTEN connection per API process', () => {
  const STREAMS = Number(process.env.ATTEMPT_STREAMS ?? 1000);

  it(`holds ${STREAMS} open streams on one LISTEN connection, and a settle reaches the streams of its attempt`, async () => {
    const m = await merchant();
    const watched = await attempt(m, {}, 'slow');
    const opened = await metric(attemptStreamsOpen);
    // Each shopper from its own IP, so the per-IP window is not what is tested.
    const streams = [];
    for (let i = 0; i < STREAMS; i += 100) {
      const batch = Array.from({ length: Math.min(100, STREAMS - i) }, () =>
        streamOf(m, `/attempts/${watched.id}/stream`, { 'x-forwarded-for': randomIp() }),
      );
      streams.push(...(await Promise.all(batch)));
    }
    try {
      expect(streams.filter((s) => s.status !== 200)).toEqual([]);
      await Promise.all(streams.map((s) => s.nth(1, 30_000)));
      expect(await metric(attemptStreamsOpen)).toBe(opened + STREAMS);
      expect(hub.size).toBeGreaterThanOrEqual(STREAMS);
      const connections = await stack.db.raw(`SELECT query FROM pg_stat_activity WHERE application_name = ?`, [
        appName,
      ]);
      expect(connections.rows).toEqual([{ query: 'LISTEN attempt_settled' }]);

      await settleAttempt(stack.db, {
        attemptId: watched.id,
        outcome: 'succeeded',
        expireIfDue: false,
        now: stack.clock(),
        publicBaseUrl: stack.settings.PUBLIC_BASE_URL,
      });
      const ends = await Promise.all(streams.map((s) => s.ended(30_000)));
      expect(ends.every(Boolean)).toBe(true);
      expect(new Set(streams.map((s) => s.events.at(-1)?.data.status))).toEqual(new Set(['succeeded']));
      await until(async () => (await metric(attemptStreamsOpen)) === opened, 'the streams to close');
    } finally {
      for (const s of streams) s.close();
    }
  });
});
