import { createApp } from '../../src/app';
import { settleAttempt } from '../../src/checkout/attempts/transitions';
import { createDb, Db } from '../../src/db/knex';
import { randomString } from '../../src/lib/ids';
import { bulkUpsertProducts } from '../../src/partner/bulk-upsert';
import { buildMerchant, buildSeller } from '../helpers/factories';
import { call } from '../helpers/http';
import { createSession, payableBody, shopper, until } from '../helpers/checkout-payments';
import { ops, seedProducts } from '../helpers/partner';
import { listen, readRunEnv, startStack, Stack } from '../helpers/stack';

/**
 * Every answer comes from one moment: a transition that commits while a read is between its
 * statements never shows in half of the answer. The read is held at a real Postgres lock (the
 * writer's transaction locks one of the tables first, so the read gets what it reads before that
 * table and then waits), the writer commits from that second connection, and the read then
 * finishes: deterministic, whichever table the route reads first.
 */
let stack: Stack;
let api: Awaited<ReturnType<typeof listen>>;
let apiDb: Db;
/** The app under test has connections of its own with this name, so the test sees when one waits for a lock. */
const APP_NAME = `snapshot-reads-${randomString(8)}`;

beforeAll(async () => {
  stack = await startStack();
  const url = new URL(readRunEnv().databaseUrl);
  url.searchParams.set('application_name', APP_NAME);
  apiDb = createDb(url.toString(), 4);
  api = await listen(createApp({ ...stack.deps, db: apiDb }));
});
afterAll(async () => {
  await api.close();
  await apiDb.destroy();
  await stack.stop();
});

type Outcome = 'succeeded' | 'failed';
type Table = 'payment_attempts' | 'checkout_sessions' | 'product_categories';

/** A payable session of a new merchant and a pending test attempt on it (no button pressed, never polled). */
async function pendingAttempt() {
  const m = await buildMerchant(stack.db);
  const pub = shopper(api, m.publishableKey);
  const s = await createSession(api, m.secretKey, payableBody());
  const started = await pub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test' } });
  expect(started.status).toBe(201);
  return { s, attemptId: started.body.attempt_id as string, pub };
}

/** True once one of the app's statements waits for a lock. */
async function appWaitsForLock(): Promise<boolean> {
  const { rows } = await stack.db.raw(
    `SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND application_name = ? AND wait_event_type = 'Lock'`,
    [APP_NAME],
  );
  return rows[0].n > 0;
}

/**
 * Sends `read` while a transaction holds `table` locked, waits until the read waits for that lock,
 * then runs `write` in that transaction and commits: the read has read what comes before `table`
 * before the commit, and reads the rest after it.
 */
async function readAcrossCommit<T>(table: Table, write: (trx: Db) => Promise<void>, read: () => Promise<T>) {
  const trx = await stack.db.transaction();
  try {
    await trx.raw(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
    const answer = read();
    await until(appWaitsForLock, `the read to wait for the lock on ${table}`);
    await write(trx);
    await trx.commit();
    return await answer;
  } catch (err) {
    await trx.rollback().catch(() => undefined);
    throw err;
  }
}

/** The real settle (attempt and session together, with its event) as the write. */
const settle = (attemptId: string, outcome: Outcome) => async (trx: Db) => {
  const settled = await settleAttempt(trx, {
    attemptId,
    outcome,
    reason: outcome === 'failed' ? 'simulated_decline' : undefined,
    expireIfDue: false,
    now: stack.clock(),
    publicBaseUrl: stack.settings.PUBLIC_BASE_URL,
  });
  expect(settled?.changed).toBe(true);
};

/** The four fields a return page acts on. */
const moment = (body: Record<string, unknown>) => ({
  status: body.status,
  session_status: body.session_status,
  payment_status: body.payment_status,
  redirect_to: body.redirect_to,
});

/** The answer before the settle, and the answer after it: nothing in between. */
function moments(s: { id: string; reference_id: string }, outcome: Outcome) {
  const success = new URL('https://shop.example.com/done?order=7');
  success.searchParams.append('session_id', s.id);
  success.searchParams.append('reference_id', s.reference_id);
  const before = { status: 'pending', session_status: 'processing', payment_status: 'unpaid', redirect_to: null };
  const after =
    outcome === 'succeeded'
      ? { status: 'succeeded', session_status: 'completed', payment_status: 'paid', redirect_to: success.toString() }
      : { status: 'failed', session_status: 'open', payment_status: 'unpaid', redirect_to: null };
  return [before, after];
}

const cases: Array<[Exclude<Table, 'product_categories'>, Outcome]> = [
  ['payment_attempts', 'succeeded'],
  ['checkout_sessions', 'succeeded'],
  ['payment_attempts', 'failed'],
  ['checkout_sessions', 'failed'],
];

describe('GET /v1/public/sessions/{code}/attempts/{attempt_id}', () => {
  it.each(cases)(
    'answers from one moment when the settle commits while it waits for %s (attempt %s)',
    async (table, outcome) => {
      const { s, attemptId, pub } = await pendingAttempt();
      const res = await readAcrossCommit(table, settle(attemptId, outcome), () =>
        pub('GET', `/sessions/${s.code}/attempts/${attemptId}`),
      );
      expect(res.status).toBe(200);
      expect(moments(s, outcome)).toContainEqual(moment(res.body));
    },
  );
});

describe('GET /v1/public/attempts/{attempt_id}', () => {
  it.each(cases)(
    'answers from one moment when the settle commits while it waits for %s (attempt %s)',
    async (table, outcome) => {
      const { s, attemptId, pub } = await pendingAttempt();
      const res = await readAcrossCommit(table, settle(attemptId, outcome), () => pub('GET', `/attempts/${attemptId}`));
      expect(res.status).toBe(200);
      expect(moments(s, outcome)).toContainEqual(moment(res.body));
    },
  );
});

describe('GET /partner/v1/products', () => {
  it('answers from one moment when a bulk upsert commits while it waits for the categories', async () => {
    const seller = await buildSeller(stack.db);
    const [product] = await seedProducts(stack.db, seller.seller_id, 1);
    const { category_id: categoryId } = await ops(stack.db, 'category', 'create', '--name', `Mugs ${randomString(6)}`);
    const res = await readAcrossCommit(
      'product_categories',
      async (trx) => {
        const results = await bulkUpsertProducts(trx, seller.seller_id, [
          { external_sku: product.sku, title: 'Renamed and filed', category_ids: [categoryId] },
        ]);
        expect(results).toMatchObject([{ status: 'accepted' }]);
      },
      () => call(api.baseUrl, 'GET', '/partner/v1/products', { key: seller.key }),
    );
    expect(res.status).toBe(200);
    const seen = res.body.data.map((p: { title: string; category_ids: string[] }) => ({
      title: p.title,
      category_ids: p.category_ids,
    }));
    expect([
      [{ title: 'Seeded product 1', category_ids: [] }],
      [{ title: 'Renamed and filed', category_ids: [categoryId] }],
    ]).toContainEqual(seen);
  });
});
