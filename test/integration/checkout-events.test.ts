import { Client as PgClient } from 'pg';
import type { Worker } from '@temporalio/worker';
import { createApp } from '../../src/app';
import { recordEvent } from '../../src/checkout/events';
import { createDb, Db, migrateLatest } from '../../src/db/knex';
import { randomString } from '../../src/lib/ids';
import { createCheckoutKey } from '../../src/ops/checkout-keys';
import { createWorker } from '../../src/worker/create-worker';
import { buildMerchant } from '../helpers/factories';
import { call, TestResponse } from '../helpers/http';
import { listen, readRunEnv, startStack, Stack } from '../helpers/stack';

/** The event log: what transitions record, `GET /v1/events`, `GET /v1/events/{id}`, and 30-day retention. */
let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack.stop());

const HOUR = 60 * 60 * 1000;
const DAY = 24 * HOUR;

function sessionBody(): Record<string, any> {
  return {
    reference_id: `order-${randomString(12)}`,
    amount: 5000,
    currency: 'IQD',
    line_items: [{ label: 'Pen', amount: 5000, type: 'charge' }],
    success_url: 'https://shop.example.com/done',
  };
}

/** Creates a session and expires it through the API; returns the expired session (one event). */
async function expiredSession(baseUrl: string, key: string) {
  const created = await call(baseUrl, 'POST', '/v1/checkout/sessions', {
    key,
    body: sessionBody(),
    idempotencyKey: `idem_${randomString(16)}`,
  });
  if (created.status !== 201) throw new Error(`create answered ${created.status}: ${created.text}`);
  const expired = await call(baseUrl, 'POST', `/v1/checkout/sessions/${created.body.id}/expire`, { key });
  if (expired.status !== 200) throw new Error(`expire answered ${expired.status}: ${expired.text}`);
  return expired.body;
}

/** Records `n` expiries one second apart on a frozen clock; returns the sessions oldest first. */
async function spacedExpiries(key: string, n: number) {
  const sessions = [];
  stack.clock.freeze(new Date(Math.floor(Date.now() / 1000) * 1000));
  try {
    for (let i = 0; i < n; i++) {
      sessions.push(await expiredSession(stack.baseUrl, key));
      stack.clock.advance(1000);
    }
  } finally {
    stack.clock.unfreeze();
  }
  return sessions;
}

const events = (key: string, query = '') => call(stack.baseUrl, 'GET', `/v1/events${query}`, { key });
const sessionIds = (res: TestResponse) =>
  res.body.data.map((e: { data: { object: { id: string } } }) => e.data.object.id);

function expectError(res: TestResponse, status: number, code: string, details: unknown[] = []) {
  expect({ status: res.status, code: res.body?.error?.code, details: res.body?.error?.details }).toEqual({
    status,
    code,
    details,
  });
}

describe('recorded events', () => {
  it('records checkout.session.expired with an evt_test_ id, livemode false and the session as data.object', async () => {
    const m = await buildMerchant(stack.db);
    const session = await expiredSession(stack.baseUrl, m.secretKey);
    const res = await events(m.secretKey);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      data: [
        {
          id: expect.stringMatching(/^evt_test_[A-Za-z0-9]+$/),
          object: 'event',
          type: 'checkout.session.expired',
          livemode: false,
          created_at: session.updated_at,
          data: { object: session },
        },
      ],
      next_cursor: null,
    });
  });

  it('gives live events an evt_ id without test_ and livemode true', async () => {
    const m = await buildMerchant(stack.db);
    const live = await createCheckoutKey(stack.db, { merchantId: m.merchantId, mode: 'live', type: 'secret' });
    const session = await expiredSession(stack.baseUrl, live.key);
    const [event] = (await events(live.key)).body.data;
    expect(event.id).toMatch(/^evt_(?!test_)[A-Za-z0-9]+$/);
    expect(event.livemode).toBe(true);
    expect(event.data.object).toMatchObject({ id: session.id, livemode: true });
  });
});

describe('GET /v1/events', () => {
  it('lists newest first, default limit 20, next_cursor null on the last page', async () => {
    const m = await buildMerchant(stack.db);
    const sessions = await spacedExpiries(m.secretKey, 21);
    const first = await events(m.secretKey);
    expect(sessionIds(first)).toEqual(
      sessions
        .slice(1)
        .reverse()
        .map((s) => s.id),
    );
    const last = await events(m.secretKey, `?cursor=${first.body.next_cursor}`);
    expect(sessionIds(last)).toEqual([sessions[0].id]);
    expect(last.body.next_cursor).toBeNull();
  });

  it('pages with limit and cursor without gaps or repeats; a full last page has next_cursor null', async () => {
    const m = await buildMerchant(stack.db);
    const sessions = (await spacedExpiries(m.secretKey, 4)).reverse();
    const one = await events(m.secretKey, '?limit=2');
    const two = await events(m.secretKey, `?limit=2&cursor=${one.body.next_cursor}`);
    expect(sessionIds(one)).toEqual([sessions[0].id, sessions[1].id]);
    expect(sessionIds(two)).toEqual([sessions[2].id, sessions[3].id]);
    expect(two.body.next_cursor).toBeNull();
  });

  it('filters by type', async () => {
    const m = await buildMerchant(stack.db);
    const [session] = await spacedExpiries(m.secretKey, 1);
    await recordEvent(stack.db, {
      merchantId: m.merchantId,
      mode: 'test',
      type: 'checkout.session.completed',
      object: { ...session, id: 'cs_test_other', status: 'completed' },
      now: new Date(),
    });
    const expired = await events(m.secretKey, '?type=checkout.session.expired');
    expect(sessionIds(expired)).toEqual([session.id]);
    const completed = await events(m.secretKey, '?type=checkout.session.completed');
    expect(sessionIds(completed)).toEqual(['cs_test_other']);
    expect((await events(m.secretKey, '?type=refund.succeeded')).body.data).toEqual([]);
  });

  it('orders events of the same millisecond by id, newest first, and pages through them one by one', async () => {
    const m = await buildMerchant(stack.db);
    const now = new Date();
    const types = ['checkout.session.expired', 'checkout.session.completed', 'checkout.session.expired'] as const;
    const recorded = [];
    for (const type of types) {
      recorded.push(
        await recordEvent(stack.db, { merchantId: m.merchantId, mode: 'test', type, object: { id: 'cs_x' }, now }),
      );
    }
    const newestFirst = recorded.map((e) => e.id).reverse();
    const pages = async (query: string) => {
      const ids: string[] = [];
      let cursor: string | null = null;
      do {
        const res = await events(m.secretKey, `?limit=1${query}${cursor ? `&cursor=${cursor}` : ''}`);
        ids.push(...res.body.data.map((e: { id: string }) => e.id));
        cursor = res.body.next_cursor;
      } while (cursor !== null);
      return ids;
    };
    expect(await pages('')).toEqual(newestFirst);
    expect(await pages('&type=checkout.session.expired')).toEqual([newestFirst[0], newestFirst[2]]);
    expect(await pages('&type=checkout.session.completed')).toEqual([newestFirst[1]]);
  });

  it('refuses a type that is not an event type with 400 validation_error', async () => {
    const m = await buildMerchant(stack.db);
    const res = await events(m.secretKey, '?type=checkout.session.expire');
    expectError(res, 400, 'validation_error', [{ field: 'type', issue: expect.any(String) }]);
  });

  it('takes since as inclusive', async () => {
    const m = await buildMerchant(stack.db);
    const [, s2, s3] = await spacedExpiries(m.secretKey, 3);
    expect(sessionIds(await events(m.secretKey, `?since=${s2.updated_at}`))).toEqual([s3.id, s2.id]);
    const justAfter = new Date(new Date(s2.updated_at).getTime() + 1).toISOString();
    expect(sessionIds(await events(m.secretKey, `?since=${justAfter}`))).toEqual([s3.id]);
  });

  it.each(['0', '101', '2.5', 'all'])('refuses limit=%s with 400 validation_error', async (limit) => {
    const m = await buildMerchant(stack.db);
    expectError(await events(m.secretKey, `?limit=${limit}`), 400, 'validation_error', [
      { field: 'limit', issue: 'limit must be an integer from 1 to 100' },
    ]);
  });

  it('refuses a cursor that is not one of this list or was tampered with, a since that is not a date-time and unknown parameters', async () => {
    const m = await buildMerchant(stack.db);
    const sessionsCursor = Buffer.from(JSON.stringify({ v: 2, l: 'sessions', k: ['2026-01-01T00:00:00.000Z', 'x'] }));
    const tampered = Buffer.from(JSON.stringify({ v: 2, l: 'events', k: ['yesterday', 'evt_test_x'] }));
    for (const cursor of [sessionsCursor, tampered]) {
      expectError(await events(m.secretKey, `?cursor=${cursor.toString('base64url')}`), 400, 'validation_error', [
        { field: 'cursor', issue: 'invalid' },
      ]);
    }
    expectError(await events(m.secretKey, '?since=last-week'), 400, 'validation_error', [
      { field: 'since', issue: expect.any(String) },
    ]);
    expectError(await events(m.secretKey, '?order=asc'), 400, 'validation_error', [
      { field: 'order', issue: 'Unrecognized key' },
    ]);
  });

  it("never lists another merchant's or the other mode's events", async () => {
    const a = await buildMerchant(stack.db);
    const b = await buildMerchant(stack.db);
    const aLive = await createCheckoutKey(stack.db, { merchantId: a.merchantId, mode: 'live', type: 'secret' });
    const aTest = await expiredSession(stack.baseUrl, a.secretKey);
    const aLiveSession = await expiredSession(stack.baseUrl, aLive.key);
    const bTest = await expiredSession(stack.baseUrl, b.secretKey);
    expect(sessionIds(await events(a.secretKey))).toEqual([aTest.id]);
    expect(sessionIds(await events(aLive.key))).toEqual([aLiveSession.id]);
    expect(sessionIds(await events(b.secretKey))).toEqual([bTest.id]);
  });
});

describe('GET /v1/events/{id}', () => {
  it('answers 200 with the event and its deliveries (none yet)', async () => {
    const m = await buildMerchant(stack.db);
    await expiredSession(stack.baseUrl, m.secretKey);
    const [listed] = (await events(m.secretKey)).body.data;
    const res = await call(stack.baseUrl, 'GET', `/v1/events/${listed.id}`, { key: m.secretKey });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ...listed, deliveries: [] });
  });

  it("answers 404 event_not_found for another merchant's or mode's event, and an unknown id", async () => {
    const a = await buildMerchant(stack.db);
    const b = await buildMerchant(stack.db);
    const aLive = await createCheckoutKey(stack.db, { merchantId: a.merchantId, mode: 'live', type: 'secret' });
    await expiredSession(stack.baseUrl, a.secretKey);
    const [event] = (await events(a.secretKey)).body.data;
    for (const [key, id] of [
      [b.secretKey, event.id],
      [aLive.key, event.id],
      [a.secretKey, 'evt_test_nothing'],
      [a.secretKey, 'evt_%00'],
    ]) {
      expectError(await call(stack.baseUrl, 'GET', `/v1/events/${id}`, { key }), 404, 'event_not_found');
    }
  });
});

describe('retention', () => {
  /**
   * The janitor sweeps every table it keeps, so skipping 30 days on the run's shared database would
   * purge other test files' rows. This test gives the janitor, a worker and an app a database of
   * their own on the same time-skipping server.
   */
  let own: {
    db: Db;
    name: string;
    taskQueue: string;
    baseUrl: string;
    close(): Promise<void>;
    worker: Worker;
    running: Promise<void>;
  };
  beforeAll(async () => {
    const run = readRunEnv();
    const name = `${run.databaseName}_events_${randomString(6).toLowerCase()}`;
    const admin = new PgClient({ connectionString: run.adminUrl });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
    const url = new URL(run.adminUrl);
    url.pathname = `/${name}`;
    const db = createDb(url.toString(), 4);
    await migrateLatest(db);
    const taskQueue = `events-retention-${randomString(8)}`;
    const worker = await createWorker({
      connection: stack.env.nativeConnection,
      namespace: stack.env.namespace ?? 'default',
      taskQueue,
      db,
      clock: stack.clock,
      publicBaseUrl: stack.settings.PUBLIC_BASE_URL,
      workflowBundle: { codePath: run.workflowBundlePath },
    });
    const settings = { ...stack.deps.settings, TEMPORAL_TASK_QUEUE: taskQueue };
    const http = await listen(createApp({ ...stack.deps, db, settings }));
    own = { db, name, taskQueue, worker, running: worker.run(), ...http };
  });
  afterAll(async () => {
    await own.close();
    own.worker.shutdown();
    await own.running;
    await own.db.destroy();
    const admin = new PgClient({ connectionString: readRunEnv().adminUrl });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${own.name} WITH (FORCE)`);
    await admin.end();
  });

  it('purges events once they are 30 days old, by the janitor workflow, and keeps younger ones', async () => {
    const m = await buildMerchant(own.db);
    await expiredSession(own.baseUrl, m.secretKey);
    const [old] = (await call(own.baseUrl, 'GET', '/v1/events', { key: m.secretKey })).body.data;
    const read = (id: string) => call(own.baseUrl, 'GET', `/v1/events/${id}`, { key: m.secretKey });

    const janitor = await stack.env.client.workflow.start('janitorWorkflow', {
      taskQueue: own.taskQueue,
      workflowId: `janitor-events-${randomString(8)}`,
    });
    const skipped = 30 * DAY - 2 * HOUR;
    await stack.env.sleep(skipped); // up to the last sweep before the event is 30 days old
    await new Promise((r) => setTimeout(r, 300));
    expect((await read(old.id)).status).toBe(200);

    stack.clock.advance(skipped); // an event recorded now, on the janitor's calendar
    try {
      await expiredSession(own.baseUrl, m.secretKey);
    } finally {
      stack.clock.advance(-skipped);
    }
    const [young] = (await call(own.baseUrl, 'GET', '/v1/events', { key: m.secretKey })).body.data;

    await stack.env.sleep(3 * HOUR); // past 30 days, and the next hourly sweep
    for (let i = 0; i < 50 && (await read(old.id)).status === 200; i++) await new Promise((r) => setTimeout(r, 100));
    expectError(await read(old.id), 404, 'event_not_found');
    expect((await read(young.id)).status).toBe(200);
    await janitor.terminate();
  }, 180_000); // 30 days of hourly sweeps, each an activity: over a minute on a loaded machine
});
