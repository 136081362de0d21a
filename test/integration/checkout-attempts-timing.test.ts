import { attemptSchedule, recheckDelays } from '../../src/temporal/session';
import { buildMerchant } from '../helpers/factories';
import { call } from '../helpers/http';
import {
  createSession,
  expectError,
  historyOf,
  HOUR,
  MINUTE,
  payableBody,
  SECOND,
  sessionEvents,
  shopper,
  sideApi,
  until,
  untilHistoryEndsWith,
} from '../helpers/checkout-payments';
import { keepHistory } from '../helpers/histories';
import { startStack, Stack } from '../helpers/stack';
import { eventsAbout } from '../helpers/events';

/**
 * Every timing path of a payment attempt on the time-skipping server, asserted to the second: the
 * slow button's 90 seconds, `003`'s 30 seconds, `002`'s re-check backoff and 24-hour timeout, an
 * attempt nobody decides, an attempt pending across `expires_at`, and a worker restarted
 * mid-attempt. The session workflow owns every timer; tests skip Temporal time and read Postgres.
 */
let stack: Stack;
let m: Awaited<ReturnType<typeof buildMerchant>>;
let pub: ReturnType<typeof shopper>;
beforeAll(async () => {
  stack = await startStack();
  m = await buildMerchant(stack.db);
  pub = shopper(stack, m.publishableKey);
});
afterAll(() => stack.stop());

const seconds = (ms: number) => ms / 1000;
/** The wait for a button or the return page, which wakes at `expires_at` to look at the session. */
const WAIT = /^timer \d+ s: until the shopper decides or returns, or expires_at$/;
const untilWaiting = (sessionId: string) =>
  until(async () => WAIT.test((await historyOf(stack, sessionId)).at(-1) ?? ''), 'the wait for the shopper');
const SLOW = `timer ${seconds(attemptSchedule.slowAnswerMs)} s: slow button: no answer for 90 s`;
const DELAYED = `timer ${seconds(attemptSchedule.delayedSuccessMs)} s: amount rule 003: pending for 30 s`;
const RECHECK = 're-check backoff (fails with timeout 24 h after the attempt began)';

const attemptRow = (id: string) => stack.db('payment_attempts').where({ id }).first();
const attemptStatus = async (id: string) => (await attemptRow(id)).status as string;
const sessionRead = async (id: string) =>
  (await call(stack.baseUrl, 'GET', `/v1/checkout/sessions/${id}`, { key: m.secretKey })).body;

/** Skips time to `beforeMs` before the attempt's 24 hours end (counted from its recorded start). */
async function untilTimeoutIn(attemptId: string, beforeMs: number) {
  const startedAt = (await attemptRow(attemptId)).created_at.getTime();
  await stack.env.sleep(startedAt + attemptSchedule.timeoutMs - (await stack.env.currentTimeMs()) - beforeMs);
}

/** Lets the worker act on anything that became due (real time: activities do not skip). */
const settle = () => new Promise((r) => setTimeout(r, 300));

/** A session (expiring `ttl` from now) with a started test attempt the workflow is waiting on. */
async function started(amount: number, ttl = HOUR) {
  const s = await createSession(
    stack,
    m.secretKey,
    payableBody({ amount, expires_at: new Date(stack.clock().getTime() + ttl).toISOString() }),
  );
  const res = await pub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test' } });
  expect(res.status).toBe(201);
  await untilWaiting(s.id);
  return { s, attemptId: res.body.attempt_id as string };
}

const decide = (attemptId: string, decision: string) =>
  pub('POST', `/test-gateway/${attemptId}/decide`, { body: { decision } });
/** The return page's first poll: the shopper came back without pressing a button. */
const returnWithoutButton = (code: string, attemptId: string) => pub('GET', `/sessions/${code}/attempts/${attemptId}`);

async function untilStatus(attemptId: string, status: string) {
  await until(async () => (await attemptStatus(attemptId)) === status, `attempt ${status}`);
}

describe('the slow button', () => {
  it('gives no answer for 90 seconds, then the amount rule decides (success)', async () => {
    const { s, attemptId } = await started(25000);
    await decide(attemptId, 'slow');
    await untilHistoryEndsWith(stack, s.id, SLOW);
    await stack.env.sleep(attemptSchedule.slowAnswerMs - SECOND);
    await settle();
    expect(await attemptStatus(attemptId)).toBe('pending');
    expect((await sessionRead(s.id)).status).toBe('processing');
    await stack.env.sleep(2 * SECOND);
    await untilStatus(attemptId, 'succeeded');
    expect((await sessionRead(s.id)).payment_status).toBe('paid');
    expect(await sessionEvents(stack.db, s.id, 'checkout.session.completed')).toHaveLength(1);
    expect((await historyOf(stack, s.id)).slice(2)).toEqual([
      'signal attemptStarted',
      'timer canceled',
      expect.stringMatching(WAIT),
      'update attemptDecide',
      'timer canceled',
      SLOW,
      'timer fired',
      'local activity settleAttempt',
      'completed',
    ]);
    await keepHistory(stack, s.id, 'session/slow-then-succeeds');
  });

  it('then declines an amount ending in 001 at 90 seconds (simulated_decline)', async () => {
    const { s, attemptId } = await started(25001);
    await decide(attemptId, 'slow');
    await untilHistoryEndsWith(stack, s.id, SLOW);
    await stack.env.sleep(attemptSchedule.slowAnswerMs - SECOND);
    await settle();
    expect(await attemptStatus(attemptId)).toBe('pending');
    await stack.env.sleep(2 * SECOND);
    await untilStatus(attemptId, 'failed');
    expect((await attemptRow(attemptId)).failure_reason).toBe('simulated_decline');
    expect((await sessionRead(s.id)).status).toBe('open');
    await keepHistory(stack, s.id, 'session/slow-then-001-declined');
  });

  it('then, for an amount ending in 003, succeeds 30 seconds after the 90', async () => {
    const { s, attemptId } = await started(25003);
    await decide(attemptId, 'slow');
    await untilHistoryEndsWith(stack, s.id, SLOW);
    await stack.env.sleep(attemptSchedule.slowAnswerMs + SECOND);
    await untilHistoryEndsWith(stack, s.id, DELAYED);
    await stack.env.sleep(attemptSchedule.delayedSuccessMs - 2 * SECOND);
    await settle();
    expect(await attemptStatus(attemptId)).toBe('pending');
    await stack.env.sleep(2 * SECOND);
    await untilStatus(attemptId, 'succeeded');
    await keepHistory(stack, s.id, 'session/slow-then-003-delayed-success');
  });
});

describe('the amount rule without a button', () => {
  it('003: pending for 30 seconds after the shopper returns, then succeeds', async () => {
    const { s, attemptId } = await started(25003);
    await returnWithoutButton(s.code, attemptId);
    await untilHistoryEndsWith(stack, s.id, DELAYED);
    await stack.env.sleep(attemptSchedule.delayedSuccessMs - SECOND);
    await settle();
    expect(await attemptStatus(attemptId)).toBe('pending');
    expect((await returnWithoutButton(s.code, attemptId)).body).toMatchObject({ status: 'pending', redirect_to: null });
    await stack.env.sleep(2 * SECOND);
    await untilStatus(attemptId, 'succeeded');
    expect((await returnWithoutButton(s.code, attemptId)).body.redirect_to).toContain(`session_id=${s.id}`);
    expect(await sessionEvents(stack.db, s.id, 'checkout.session.completed')).toHaveLength(1);
    await keepHistory(stack, s.id, 'session/return-without-button-003-delayed-success');
  });

  it('002: stays pending, re-checked on the backoff, and fails with timeout 24 hours after the attempt began', async () => {
    const { s, attemptId } = await started(25002);
    await returnWithoutButton(s.code, attemptId);
    await untilHistoryEndsWith(stack, s.id, `timer ${seconds(attemptSchedule.recheckBackoffMs[0])} s: ${RECHECK}`);
    await untilTimeoutIn(attemptId, SECOND);
    await settle();
    expect(await attemptStatus(attemptId)).toBe('pending');
    expect((await sessionRead(s.id)).status).toBe('processing');
    const expected = recheckDelays(0).map(seconds);
    expect((await attemptRow(attemptId)).checks).toBe(expected.length - 1);

    await stack.env.sleep(2 * SECOND);
    await untilStatus(attemptId, 'failed');
    expect((await attemptRow(attemptId)).failure_reason).toBe('timeout');
    const timers = (await historyOf(stack, s.id))
      .filter((line) => line.endsWith(RECHECK))
      .map((line) => Number(/^timer ([\d.]+) s/.exec(line)![1]));
    // Each re-check after its backoff (the last repeating); the final wait ends exactly at 24 hours
    // from the attempt's recorded start, a moment before the workflow took it.
    expect(timers.slice(0, -1)).toEqual(expected.slice(0, -1));
    expect(timers.at(-1)).toBeGreaterThan(expected.at(-1)! - 5);
    expect(timers.at(-1)).toBeLessThanOrEqual(expected.at(-1)!);
    const failed = await sessionEvents(stack.db, s.id, 'payment.attempt.failed');
    expect(failed.map((e) => e.data_object.failed_attempt.reason)).toEqual(['timeout']);
    await keepHistory(stack, s.id, 'session/return-without-button-002-rechecks-then-timeout');
  });

  it('fails an attempt nobody decides or verifies with timeout after 24 hours', async () => {
    const { s, attemptId } = await started(25000, 24 * HOUR);
    await untilTimeoutIn(attemptId, SECOND);
    await settle();
    expect(await attemptStatus(attemptId)).toBe('pending');
    await stack.env.sleep(2 * SECOND);
    await untilStatus(attemptId, 'failed');
    expect((await attemptRow(attemptId)).failure_reason).toBe('timeout');
    expect(await sessionEvents(stack.db, s.id, 'payment.attempt.failed')).toHaveLength(1);
    await keepHistory(stack, s.id, 'session/undecided-attempt-timeout');
  });
});

describe('an attempt pending across expires_at', () => {
  it('keeps the session processing past expires_at (no expiry), and a success then completes it', async () => {
    const { s, attemptId } = await started(25000, 6 * MINUTE);
    await stack.env.sleep(10 * MINUTE);
    await settle();
    expect((await sessionRead(s.id)).status).toBe('processing');
    expect(await sessionEvents(stack.db, s.id, 'checkout.session.expired')).toHaveLength(0);
    expectError(
      await call(stack.baseUrl, 'POST', `/v1/checkout/sessions/${s.id}/expire`, { key: m.secretKey }),
      409,
      'session_not_open',
    );
    await decide(attemptId, 'succeeded');
    await untilStatus(attemptId, 'succeeded');
    expect(await sessionRead(s.id)).toMatchObject({ status: 'completed', payment_status: 'paid' });
    await stack.env.sleep(HOUR);
    await settle();
    expect(await sessionEvents(stack.db, s.id, 'checkout.session.expired')).toHaveLength(0);
    expect(await stack.env.client.workflow.getHandle(s.id).result()).toBe('completed');
    await keepHistory(stack, s.id, 'session/pending-at-expires-at-then-succeeds');
  });

  it('expires the session as soon as the attempt fails: payment.attempt.failed, then checkout.session.expired', async () => {
    const { s, attemptId } = await started(25000, 6 * MINUTE);
    await stack.env.sleep(10 * MINUTE);
    await settle();
    await decide(attemptId, 'failed');
    await untilStatus(attemptId, 'failed');
    const session = await sessionRead(s.id);
    expect(session.status).toBe('expired');
    const events = await eventsAbout(stack.db, s.id);
    expect(events.map((e) => [e.type, e.data_object.status])).toEqual([
      ['payment.attempt.failed', 'open'],
      ['checkout.session.expired', 'expired'],
    ]);
    expect(await stack.env.client.workflow.getHandle(s.id).result()).toBe('expired');
    expectError(await pub('GET', `/sessions/${s.code}`), 410, 'session_expired');
    await keepHistory(stack, s.id, 'session/pending-at-expires-at-then-fails-and-expires');
  });

  it('still expires the session exactly at expires_at after an attempt failed before it', async () => {
    const { s, attemptId } = await started(25000, 10 * MINUTE);
    await decide(attemptId, 'failed');
    await untilStatus(attemptId, 'failed');
    await until(async () => {
      const history = await historyOf(stack, s.id);
      return history.at(-2) === 'local activity settleAttempt' && history.at(-1)!.startsWith('timer ');
    }, 'the expiry timer again');
    await stack.env.sleep(10 * MINUTE - 2 * SECOND);
    await settle();
    expect((await sessionRead(s.id)).status).toBe('open');
    await stack.env.sleep(3 * SECOND);
    await until(async () => (await sessionRead(s.id)).status === 'expired', 'the expiry');
    expect(await sessionEvents(stack.db, s.id, 'checkout.session.expired')).toHaveLength(1);
    await keepHistory(stack, s.id, 'session/failed-attempt-then-expiry');
  });
});

describe('a worker restarted mid-attempt', () => {
  it('loses nothing: stopped during the slow 90 seconds, time skipped, a new worker settles it with one event', async () => {
    const side = await sideApi(stack);
    try {
      const sidePub = shopper(side, m.publishableKey);
      const s = await side.createSession(m.secretKey, payableBody());
      const res = await sidePub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test' } });
      await sidePub('POST', `/test-gateway/${res.body.attempt_id}/decide`, { body: { decision: 'slow' } });
      await untilHistoryEndsWith(stack, s.id, SLOW);

      await side.stopWorker();
      await stack.env.sleep(attemptSchedule.slowAnswerMs + SECOND);
      await settle();
      expect(await attemptStatus(res.body.attempt_id)).toBe('pending');
      await side.startWorker();

      await untilStatus(res.body.attempt_id, 'succeeded');
      expect((await sessionRead(s.id)).status).toBe('completed');
      await settle();
      expect(await sessionEvents(stack.db, s.id, 'checkout.session.completed')).toHaveLength(1);
      await keepHistory(stack, s.id, 'session/worker-restarted-during-slow');
    } finally {
      await side.close();
    }
  });

  it('loses nothing: a button pressed while no worker runs is settled by the next one, with one event', async () => {
    const side = await sideApi(stack);
    try {
      const sidePub = shopper(side, m.publishableKey);
      const s = await side.createSession(m.secretKey, payableBody());
      const res = await sidePub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test' } });
      await untilWaiting(s.id);

      await side.stopWorker();
      const decided = await sidePub('POST', `/test-gateway/${res.body.attempt_id}/decide`, {
        body: { decision: 'failed' },
      });
      expect(decided.status).toBe(200);
      // No skipping here: the test server does not move time past a task no worker has taken.
      await settle();
      expect(await attemptStatus(res.body.attempt_id)).toBe('pending');
      await side.startWorker();

      await untilStatus(res.body.attempt_id, 'failed');
      expect((await sessionRead(s.id)).status).toBe('open');
      await settle();
      expect(await sessionEvents(stack.db, s.id, 'payment.attempt.failed')).toHaveLength(1);
    } finally {
      await side.close();
    }
  });

  it("loses nothing: stopped during 002's backoff across its 24 hours, the new worker fails it with timeout and one event", async () => {
    const side = await sideApi(stack);
    try {
      const sidePub = shopper(side, m.publishableKey);
      const s = await side.createSession(m.secretKey, payableBody({ amount: 25002 }));
      const res = await sidePub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test' } });
      await sidePub('GET', `/attempts/${res.body.attempt_id}`);
      await untilHistoryEndsWith(stack, s.id, `timer ${seconds(attemptSchedule.recheckBackoffMs[0])} s: ${RECHECK}`);

      await side.stopWorker();
      // Time skips up to the first re-check, which waits for a worker: the new one starts then.
      const skipped = stack.env.sleep(attemptSchedule.timeoutMs + SECOND);
      await untilHistoryEndsWith(stack, s.id, 'timer fired');
      await settle();
      expect(await attemptStatus(res.body.attempt_id)).toBe('pending');
      await side.startWorker();
      await skipped;

      await untilStatus(res.body.attempt_id, 'failed');
      expect((await attemptRow(res.body.attempt_id)).failure_reason).toBe('timeout');
      await settle();
      expect(await sessionEvents(stack.db, s.id, 'payment.attempt.failed')).toHaveLength(1);
      // expires_at passed meanwhile, so the failure expired the session too, once.
      expect((await sessionRead(s.id)).status).toBe('expired');
      expect(await sessionEvents(stack.db, s.id, 'checkout.session.expired')).toHaveLength(1);
      await keepHistory(stack, s.id, 'session/worker-restarted-during-002-backoff');
    } finally {
      await side.close();
    }
  });
});
