import { settleAttempt } from '../../src/checkout/attempts/transitions';
import { createDb, Db } from '../../src/db/knex';
import { randomString } from '../../src/lib/ids';
import { buildMerchant } from '../helpers/factories';
import { payableBody, shopper, sideApi, until } from '../helpers/checkout-payments';
import { readRunEnv, startStack, Stack } from '../helpers/stack';

/**
 * Every answer comes from one moment: a settle that commits while a poll is between its reads
 * never shows in half of the answer. The poll is held at a real Postgres lock (the settle's
 * transaction locks one of the two tables first, so the poll reads the other and waits), the
 * settle commits from that second connection, and the poll then finishes: deterministic, whichever
 * table the route reads first.
 */
let stack: Stack;
let side: Awaited<ReturnType<typeof sideApi>>;
let sideDb: Db;
/** The side API's connections carry this name, so the test can tell when one of them waits for a lock. */
const APP_NAME = `snapshot-reads-${randomString(8)}`;

beforeAll(async () => {
  stack = await startStack();
  const url = new URL(readRunEnv().databaseUrl);
  url.searchParams.set('application_name', APP_NAME);
  sideDb = createDb(url.toString(), 4);
  side = await sideApi(stack, { db: sideDb });
});
afterAll(async () => {
  await side.close();
  await sideDb.destroy();
  await stack.stop();
});

type Outcome = 'succeeded' | 'failed';
type Table = 'payment_attempts' | 'checkout_sessions';

/** A payable session of a new merchant and a pending test attempt on it (no button pressed, never polled). */
async function pendingAttempt() {
  const m = await buildMerchant(stack.db);
  const pub = shopper(side, m.publishableKey);
  const s = await side.createSession(m.secretKey, payableBody());
  const started = await pub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test' } });
  expect(started.status).toBe(201);
  return { s, attemptId: started.body.attempt_id as string, pub };
}

/** True once one of the side API's statements waits for a lock. */
async function sideWaitsForLock(): Promise<boolean> {
  const { rows } = await stack.db.raw(
    `SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND application_name = ? AND wait_event_type = 'Lock'`,
    [APP_NAME],
  );
  return rows[0].n > 0;
}

/**
 * Sends `read` while a transaction holds `table` locked, waits until the read waits for that lock,
 * then settles the attempt in that transaction (the real settle: attempt and session together, with
 * its event) and commits: the read has read the other table before the commit and reads this one after.
 */
async function readAcrossSettle<T>(table: Table, attemptId: string, outcome: Outcome, read: () => Promise<T>) {
  const trx = await stack.db.transaction();
  try {
    await trx.raw(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
    const answer = read();
    await until(sideWaitsForLock, `the read to wait for the lock on ${table}`);
    const settled = await settleAttempt(trx, {
      attemptId,
      outcome,
      reason: outcome === 'failed' ? 'simulated_decline' : undefined,
      expireIfDue: false,
      now: stack.clock(),
      publicBaseUrl: stack.settings.PUBLIC_BASE_URL,
    });
    expect(settled?.changed).toBe(true);
    await trx.commit();
    return await answer;
  } catch (err) {
    await trx.rollback().catch(() => undefined);
    throw err;
  }
}

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

const cases: Array<[Table, Outcome]> = [
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
      const res = await readAcrossSettle(table, attemptId, outcome, () =>
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
      const res = await readAcrossSettle(table, attemptId, outcome, () => pub('GET', `/attempts/${attemptId}`));
      expect(res.status).toBe(200);
      expect(moments(s, outcome)).toContainEqual(moment(res.body));
    },
  );
});
