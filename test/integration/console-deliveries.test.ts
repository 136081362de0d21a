import { deliveriesQuery, deliveryState, DELIVERIES_PER_PAGE } from '../../src/console/delivery-list';
import { base32 } from '../../src/lib/id-time';
import { randomString } from '../../src/lib/ids';
import * as migration from '../../migrations/20261201100000_delivery_endpoint_index';
import { ConsoleBrowser, consoleUser, TestConsoleUser } from '../helpers/console';
import { buildMerchant } from '../helpers/factories';
import { useWebhookStack, webhookSteps } from '../helpers/webhooks';

/**
 * The console's endpoint deliveries beyond the newest 50 (a keyset cursor, newest first, and the
 * delivered / pending / failed filters) read through `event_deliveries_by_endpoint`, and Developers
 * › Events by date range and event id, over real HTTP on the real app and Postgres.
 */
const env = useWebhookStack();
const steps = webhookSteps(() => env.stack);
const WEBHOOKS = '/console/developers/webhooks';
const EVENTS = '/console/developers/events';

async function signedIn(user: TestConsoleUser) {
  const b = new ConsoleBrowser(env.stack);
  await b.signIn(user);
  return b;
}

/** A test-mode event id made at `at` (as newId makes them, with a chosen time). */
const eventIdAt = (at: number) => `evt_test_${base32(at, 10)}${randomString(18, '0123456789abcdefghjkmnpqrstvwxyz')}`;

interface Attempt {
  event_id: string;
  generation: number;
  attempt_no: number;
  status_code: number | null;
  next_retry_at: Date | null;
  created_at: Date;
}
/** The state the list shows for a seeded attempt: each is its delivery's only attempt (no later one). */
const stateOf = (a: Attempt) => deliveryState({ ...a, retried: false });
const keyOf = (a: Pick<Attempt, 'event_id' | 'generation' | 'attempt_no'>) =>
  `${a.event_id}-${a.generation}-${a.attempt_no}`;

/**
 * `count` attempts to `endpointId` over the last two days, newest first in the order the page
 * must show them: created_at, then event id, generation and attempt number, all descending. Every
 * fifth shares its created_at with the one before (so the 50th and 51st tie, across the first
 * page's boundary); states cycle
 * delivered, pending (a retry due), failed (4xx, none due), failed (no answer).
 */
async function seedAttempts(
  endpointId: string,
  count: number,
  { latest = env.stack.clock().getTime() - 60_000, stepMs = 20 * 60_000 } = {},
): Promise<Attempt[]> {
  const now = env.stack.clock().getTime();
  const rows: Attempt[] = [];
  let at = latest;
  for (let i = 0; i < count; i++) {
    if (i === 0 || i % 5 !== 0) at -= stepMs;
    const kind = i % 4;
    rows.push({
      event_id: eventIdAt(at - 1_000),
      generation: i % 7 === 0 ? 1 : 0,
      attempt_no: 1 + (i % 3),
      status_code: kind === 0 ? 200 : kind === 1 ? 503 : kind === 2 ? 410 : null,
      next_retry_at: kind === 1 ? new Date(now + 60_000) : null,
      created_at: new Date(at),
    });
  }
  await env.stack.db.batchInsert(
    'event_deliveries',
    rows.map((r) => ({
      ...r,
      endpoint_id: endpointId,
      error: r.status_code === null ? 'connect ECONNREFUSED' : null,
      delivered_at: r.created_at,
      duration_ms: 12,
      response_body: r.status_code === 200 ? 'ok' : 'no',
    })),
    500,
  );
  return rows.sort(
    (a, b) =>
      b.created_at.getTime() - a.created_at.getTime() ||
      (a.event_id < b.event_id ? 1 : a.event_id > b.event_id ? -1 : 0) ||
      b.generation - a.generation ||
      b.attempt_no - a.attempt_no,
  );
}

/** The attempts a page shows, in order, and its "older" link. */
function shown(text: string) {
  const rows = [...text.matchAll(/<tr\s+class="delivery-(\w+)"\s+id="delivery-([a-z0-9_]+-\d+-\d+)"\s*>/g)].map(
    (m) => ({
      state: m[1],
      key: m[2],
    }),
  );
  const older = /<a\s+href="([^"]+)"\s+id="older-deliveries"\s*>/.exec(text)?.[1].replace(/&amp;/g, '&') ?? null;
  return { rows, older };
}

/** Every page from `first` on, following the "older" links. */
async function allPages(b: ConsoleBrowser, first: string) {
  const pages: Array<ReturnType<typeof shown>> = [];
  for (let path: string | null = first; path;) {
    const res = await b.get(path);
    expect([path, res.status]).toEqual([path, 200]);
    const page = shown(res.text);
    pages.push(page);
    path = page.older;
    expect(pages.length).toBeLessThan(10);
  }
  return pages;
}

async function merchantWithEndpoint() {
  const m = await buildMerchant(env.stack.db);
  const endpoint = await steps.createEndpoint(m.secretKey, env.receiver.url(`/deliveries-${randomString(6)}`));
  return { m, endpoint };
}

describe('an endpoint’s deliveries, a page at a time', () => {
  it('pages through every attempt newest first, 50 a page, each once, ties broken by event, generation and attempt', async () => {
    const { m, endpoint } = await merchantWithEndpoint();
    const attempts = await seedAttempts(endpoint.id, 123);
    // Another endpoint's attempts never show.
    const other = await steps.createEndpoint(m.secretKey, env.receiver.url('/deliveries-other'));
    const theirs = await seedAttempts(other.id, 3);
    const b = await signedIn(await consoleUser(env.stack, { merchantId: m.merchantId }, 'viewer'));
    const base = `${WEBHOOKS}/${endpoint.id}`;
    const pages = await allPages(b, base);
    expect(pages.map((p) => p.rows.length)).toEqual([DELIVERIES_PER_PAGE, DELIVERIES_PER_PAGE, 23]);
    expect(pages.flatMap((p) => p.rows.map((r) => r.key))).toEqual(attempts.map(keyOf));
    expect(pages.flatMap((p) => p.rows.map((r) => r.state))).toEqual(attempts.map(stateOf));
    const text = (await b.get(base)).text;
    for (const t of theirs) expect(text).not.toContain(t.event_id);
    // A page past the first links back to the newest.
    expect((await b.get(pages[0].older!)).text).toContain(`<a href="${base}">Newest deliveries</a>`);
  });

  it('filters delivered, pending and failed attempts across pages, the filter kept by the older link', async () => {
    const { m, endpoint } = await merchantWithEndpoint();
    const attempts = await seedAttempts(endpoint.id, 130);
    const b = await signedIn(await consoleUser(env.stack, { merchantId: m.merchantId }, 'developer'));
    const base = `${WEBHOOKS}/${endpoint.id}`;
    for (const state of ['delivered', 'pending', 'failed'] as const) {
      const expected = attempts.filter((a) => stateOf(a) === state).map(keyOf);
      const pages = await allPages(b, `${base}?state=${state}`);
      expect([state, pages.flatMap((p) => p.rows.map((r) => r.key))]).toEqual([state, expected]);
      expect(pages.every((p) => p.rows.every((r) => r.state === state))).toBe(true);
      if (pages.length > 1) expect(pages[0].older).toContain(`state=${state}`);
      const page = await b.get(`${base}?state=${state}`);
      expect(page.text).toContain(`href="${base}?state=${state}" aria-current="page"`);
    }
    expect(attempts.filter((a) => stateOf(a) === 'failed').length).toBeGreaterThan(DELIVERIES_PER_PAGE);
    // An unknown state shows all.
    expect(shown((await b.get(`${base}?state=nope`)).text).rows).toHaveLength(DELIVERIES_PER_PAGE);
  });

  it('shows an attempt whose retry was made as failed, only the latest attempt of a delivery as pending', async () => {
    const { m, endpoint } = await merchantWithEndpoint();
    const now = env.stack.clock().getTime();
    const eventId = eventIdAt(now - 10 * 60_000);
    // Attempt 1 failed and scheduled attempt 2, which was made and failed in turn: only attempt 2's retry is to come.
    const attempt = (no: number, at: number) => ({
      event_id: eventId,
      endpoint_id: endpoint.id,
      generation: 0,
      attempt_no: no,
      status_code: 503,
      error: null,
      next_retry_at: new Date(at + 60_000),
      created_at: new Date(at),
      delivered_at: new Date(at),
      duration_ms: 12,
      response_body: 'no',
    });
    await env.stack.db('event_deliveries').insert([attempt(1, now - 5 * 60_000), attempt(2, now - 4 * 60_000)]);
    const b = await signedIn(await consoleUser(env.stack, { merchantId: m.merchantId }, 'viewer'));
    const base = `${WEBHOOKS}/${endpoint.id}`;
    expect(shown((await b.get(base)).text).rows).toEqual([
      { state: 'pending', key: `${eventId}-0-2` },
      { state: 'failed', key: `${eventId}-0-1` },
    ]);
    expect(shown((await b.get(`${base}?state=pending`)).text).rows.map((r) => r.key)).toEqual([`${eventId}-0-2`]);
    expect(shown((await b.get(`${base}?state=failed`)).text).rows.map((r) => r.key)).toEqual([`${eventId}-0-1`]);
  });

  it('refuses a cursor it did not write (422), and shows nothing of another merchant’s endpoint (404)', async () => {
    const { m, endpoint } = await merchantWithEndpoint();
    const theirs = await merchantWithEndpoint();
    await seedAttempts(endpoint.id, 60);
    const b = await signedIn(await consoleUser(env.stack, { merchantId: m.merchantId }, 'owner'));
    const base = `${WEBHOOKS}/${endpoint.id}`;
    const older = shown((await b.get(base)).text).older!;
    const cursor = new URLSearchParams(older.split('?')[1]).get('cursor')!;
    const eventsCursor = Buffer.from(JSON.stringify({ v: 2, l: 'events', k: ['2026-01-01T00:00:00.000Z', 'x'] }));
    const forged = (k: unknown[]) =>
      Buffer.from(JSON.stringify({ v: 2, l: 'console_deliveries', k })).toString('base64url');
    for (const bad of [
      'not-a-cursor',
      eventsCursor.toString('base64url'),
      forged(['yesterday', 'evt_test_x', 0, 1]),
      forged(['2026-01-01T00:00:00.000Z', "evt_'; drop", 0, 1]),
      forged(['2026-01-01T00:00:00.000Z', 'evt_test_x', 'one', 1]),
    ]) {
      const res = await b.get(`${base}?cursor=${bad}`);
      expect([bad, res.status]).toEqual([bad, 422]);
      expect(res.text).toContain('That page link is not valid any more');
    }
    // Another merchant's endpoint, even with a cursor of this one's: not found.
    expect((await b.get(`${WEBHOOKS}/${theirs.endpoint.id}?cursor=${cursor}`)).status).toBe(404);
  });

  it('reads the endpoint’s attempts through event_deliveries_by_endpoint, in the endpoint mode’s days only', async () => {
    const { endpoint } = await merchantWithEndpoint();
    // Yesterday (UTC) from 20:00 back, every 10 s: one day's partition, among 20 other endpoints'
    // attempts of the same hours (10,500 rows), so reading the day whole would cost far more.
    const yesterday = new Date(env.stack.clock().getTime() - 86_400_000).toISOString().slice(0, 10);
    const day = { latest: Date.parse(`${yesterday}T20:00:00.000Z`), stepMs: 10_000 };
    const attempts = await seedAttempts(endpoint.id, 500, day);
    for (let i = 0; i < 20; i++) await seedAttempts(`we_test_other${i}${randomString(8)}`, 500, day);
    await env.stack.db.raw('ANALYZE event_deliveries');
    const now = env.stack.clock();
    const middle = attempts[120];
    const plans: string[] = [];
    for (const input of [
      { endpointId: endpoint.id, mode: 'test' as const, now },
      { endpointId: endpoint.id, mode: 'test' as const, now, state: 'failed' as const },
      {
        endpointId: endpoint.id,
        mode: 'test' as const,
        now,
        after: {
          createdAt: middle.created_at.toISOString(),
          eventId: middle.event_id,
          generation: middle.generation,
          attemptNo: middle.attempt_no,
        },
      },
    ]) {
      const { sql, bindings } = deliveriesQuery(env.stack.db, input).toSQL();
      const { rows } = await env.stack.db.raw(`EXPLAIN ${sql}`, bindings);
      plans.push(rows.map((r: { 'QUERY PLAN': string }) => r['QUERY PLAN']).join('\n'));
    }
    // The days holding the endpoint's attempts (empty days cost nothing whichever way they are read).
    const days: string[] = (
      await env.stack.db.raw(
        `SELECT DISTINCT tableoid::regclass::text AS day FROM event_deliveries WHERE endpoint_id = ? ORDER BY 1`,
        [endpoint.id],
      )
    ).rows.map((r: { day: string }) => r.day);
    expect(days).toEqual([`event_deliveries_d${yesterday.replace(/-/g, '')}_test`]);
    for (const plan of plans) {
      for (const day of days) {
        expect(plan).toMatch(new RegExp(`Index Scan (Backward )?(using|on) ${day}_by_endpoint`));
        expect(plan).not.toMatch(new RegExp(`Seq Scan on ${day}\\b`));
      }
      // The live days are pruned at planning.
      expect(plan).not.toMatch(/_live/);
    }
  });
});

describe('in Kurdish and Arabic', () => {
  it('shows the deliveries’ filters and page links and the events’ search right to left', async () => {
    const { m, endpoint } = await merchantWithEndpoint();
    await seedAttempts(endpoint.id, 60);
    const b = await signedIn(await consoleUser(env.stack, { merchantId: m.merchantId }, 'viewer'));
    const base = `${WEBHOOKS}/${endpoint.id}`;
    const ku = await b.get(`${base}?lang=ku`);
    expect(ku.text).toContain('dir="rtl"');
    for (const text of ['پیشاندانی گەیاندنەکان', 'گەیاندنە کۆنترەکان', 'شکستی هێنا']) expect(ku.text).toContain(text);
    const older = shown(ku.text).older!;
    const ar = await b.get(`${older}&lang=ar`);
    expect([ar.status, ar.text.includes('أحدث التسليمات'), ar.text.includes('dir="rtl"')]).toEqual([200, true, true]);
    const events = await b.get(`${EVENTS}?lang=ar`);
    for (const text of ['معرّف الحدث', 'أُنشئت من']) expect(events.text).toContain(text);
  });
});

describe('the index’s migration', () => {
  it('left the parent index valid with a copy on every partition, gives days made later their copy, and runs again as a no-op', async () => {
    const db = env.stack.db;
    const missing = () =>
      db.raw(
        `SELECT p.relid::regclass::text AS partition
           FROM pg_partition_tree('event_deliveries') p
          WHERE p.isleaf AND NOT EXISTS (
                  SELECT 1 FROM pg_inherits i JOIN pg_index x ON x.indexrelid = i.inhrelid
                   WHERE i.inhparent = 'event_deliveries_by_endpoint'::regclass AND x.indrelid = p.relid)`,
      );
    const valid = async () =>
      (await db.raw(`SELECT indisvalid FROM pg_index WHERE indexrelid = 'event_deliveries_by_endpoint'::regclass`))
        .rows[0].indisvalid;
    expect(await valid()).toBe(true);
    expect((await missing()).rows).toEqual([]);
    // A day the janitor makes later (here: 60 days ahead) is born with its copy.
    const day = new Date(env.stack.clock().getTime() + 60 * 86_400_000).toISOString().slice(0, 10);
    await db.raw('SELECT event_log_ensure_day(?::date)', [day]);
    const suffix = day.replace(/-/g, '');
    const copies = await db.raw(
      `SELECT indexrelid::regclass::text AS name, pg_get_indexdef(indexrelid) AS def FROM pg_index
        WHERE indrelid IN (?::regclass, ?::regclass) AND pg_get_indexdef(indexrelid) LIKE '%(endpoint_id, created_at)'`,
      [`event_deliveries_d${suffix}_live`, `event_deliveries_d${suffix}_test`],
    );
    expect(copies.rows).toHaveLength(2);
    expect((await missing()).rows).toEqual([]);
    // Again (as after a lock timeout's retry): nothing to build, nothing fails.
    await migration.up(db);
    expect(await valid()).toBe(true);
  });
});

describe('Developers › Events by date range and id', () => {
  it('keeps the events of the chosen UTC days, finds one by id in this merchant’s mode only, and refuses a bad date', async () => {
    const m = await buildMerchant(env.stack.db);
    const other = await buildMerchant(env.stack.db);
    const endpoint = await steps.createEndpoint(m.secretKey, env.receiver.url('/events-range'));
    const theirEndpoint = await steps.createEndpoint(other.secretKey, env.receiver.url('/events-range-other'));
    const day = () => env.stack.clock().toISOString().slice(0, 10);
    const first = await steps.sendTest(m.secretKey, endpoint.id);
    const firstDay = day();
    env.stack.clock.advance(2 * 86_400_000);
    const second = await steps.sendTest(m.secretKey, endpoint.id, 'refund.succeeded');
    const secondDay = day();
    env.stack.clock.advance(2 * 86_400_000);
    const third = await steps.sendTest(m.secretKey, endpoint.id);
    const thirdDay = day();
    const theirs = await steps.sendTest(other.secretKey, theirEndpoint.id);
    const b = await signedIn(await consoleUser(env.stack, { merchantId: m.merchantId }, 'viewer'));
    const shows = async (query: string) => {
      const res = await b.get(`${EVENTS}?${query}`);
      expect([query, res.status]).toEqual([query, 200]);
      return [first, second, third, theirs].filter((id) => res.text.includes(`id="event-${id}"`));
    };
    expect(await shows('')).toEqual([first, second, third]);
    expect(await shows(`from=${secondDay}&to=${secondDay}`)).toEqual([second]);
    expect(await shows(`from=${secondDay}`)).toEqual([second, third]);
    expect(await shows(`to=${secondDay}`)).toEqual([first, second]);
    expect(await shows(`from=${firstDay}&to=${thirdDay}&type=refund.succeeded`)).toEqual([second]);
    expect(await shows(`from=${thirdDay}&to=${firstDay}`)).toEqual([]);
    // By id: this merchant's, in this mode; another merchant's id finds nothing.
    expect(await shows(`q=${second}`)).toEqual([second]);
    expect(await shows(`q=${theirs}`)).toEqual([]);
    expect((await b.get(`${EVENTS}?q=${theirs}`)).text).toContain('No event of this account and mode');
    expect(await shows(`q=${encodeURIComponent("evt_test_' OR 1=1 --")}`)).toEqual([]);
    // The other mode has none of them.
    await b.post('/console/mode', { mode: 'live' });
    expect(await shows(`q=${second}`)).toEqual([]);
    await b.post('/console/mode', { mode: 'test' });
    for (const bad of ['from=2026-02-30', 'to=yesterday', 'from=26-01-01'])
      expect([bad, (await b.get(`${EVENTS}?${bad}`)).status]).toEqual([bad, 422]);
    // The date inputs keep what was asked.
    expect((await b.get(`${EVENTS}?from=${secondDay}`)).text).toContain(`name="from" value="${secondDay}"`);
  });
});
