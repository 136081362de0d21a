import { temporal } from '@temporalio/proto';
import { createSessionActivities } from '../../activities/session';
import { randomString } from '../../src/lib/ids';
import { buildMerchant } from '../helpers/factories';
import { call, TestResponse } from '../helpers/http';
import { startStack, Stack } from '../helpers/stack';
import { keepHistory } from '../helpers/histories';
import { eventsAbout } from '../helpers/events';

/**
 * The session workflow on the time-skipping server: it starts with the session, holds the timer
 * for `expires_at` and expires the session through an activity; `/expire` and reconciliation stop
 * it. The timer runs on Temporal time to `expires_at`, so the app clock follows Temporal's (as in
 * every time-skipping stack); these tests freeze it while creating and then assert "open at
 * ttl − 1 s, expired at ttl + 1 s".
 */
let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack.stop());

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const EventType = temporal.api.enums.v1.EventType;
/** The expiry timer as historyOf shows it when it ends at the session's recorded expires_at. */
const TIMER_TO_EXPIRES_AT = 'timer to expires_at: until expires_at, unless settled first';

function sessionBody(over: Record<string, unknown> = {}): Record<string, any> {
  return {
    reference_id: `order-${randomString(12)}`,
    amount: 9000,
    currency: 'IQD',
    line_items: [{ label: 'Book', amount: 9000, type: 'charge' }],
    success_url: 'https://shop.example.com/done',
    ...over,
  };
}

/** Creates a session whose `expires_at` is `ttlMs` from a frozen now (the default lifetime when null). */
async function createExpiringIn(key: string, ttlMs: number | null, over: Record<string, unknown> = {}) {
  const now = stack.clock();
  stack.clock.freeze(now);
  try {
    const expires = ttlMs === null ? {} : { expires_at: new Date(now.getTime() + ttlMs).toISOString() };
    const res = await call(stack.baseUrl, 'POST', '/v1/checkout/sessions', {
      key,
      body: sessionBody({ ...expires, ...over }),
      idempotencyKey: `idem_${randomString(16)}`,
    });
    if (res.status !== 201) throw new Error(`create answered ${res.status}: ${res.text}`);
    return res.body;
  } finally {
    stack.clock.unfreeze();
  }
}

/** The session's recorded expires_at, in epoch milliseconds. */
const expiresAtOf = async (id: string) =>
  new Date((await stack.db('checkout_sessions').where({ id }).first('expires_at')).expires_at).getTime();

/**
 * Skips Temporal's time to one second before the session's recorded expires_at (real time passes
 * between the create and the skip, seconds on a loaded machine, so a fixed skip would overshoot).
 */
async function sleepToJustBefore(id: string): Promise<void> {
  await stack.env.sleep((await expiresAtOf(id)) - SECOND - (await stack.env.currentTimeMs()));
}

const status = async (key: string, id: string) =>
  (await call(stack.baseUrl, 'GET', `/v1/checkout/sessions/${id}`, { key })).body.status;
const expire = (key: string, id: string) => call(stack.baseUrl, 'POST', `/v1/checkout/sessions/${id}/expire`, { key });
const expiredEvents = (sessionId: string) => eventsAbout(stack.db, sessionId, 'checkout.session.expired');

/** Polls `check` in real time (activities need it to finish) until it holds. */
async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const workflowStatus = async (id: string) => (await stack.env.client.workflow.getHandle(id).describe()).status.name;

/** An event's summary (user metadata), as the Web UI shows it beside the event. */
const summaryOf = (e: temporal.api.history.v1.IHistoryEvent) =>
  e.userMetadata?.summary?.data ? JSON.parse(Buffer.from(e.userMetadata.summary.data).toString()) : '';

/** Milliseconds of a protobuf Timestamp or Duration. */
const msOf = (t: { seconds?: unknown; nanos?: number | null } | null | undefined) =>
  Number(t?.seconds ?? 0) * 1000 + Number(t?.nanos ?? 0) / 1e6;

/**
 * The workflow's history as short lines: what a reader of the Web UI sees. A timer reads
 * "timer to expires_at" when it ends at the session's recorded expires_at (counted from the
 * workflow task that started it, whose time is the workflow's now), else its length in seconds:
 * on a loaded machine the first task may run seconds after the create, and the timer is shorter.
 */
async function historyOf(id: string): Promise<string[]> {
  const expiresAtMs = await expiresAtOf(id);
  const history = await stack.env.client.workflow.getHandle(id).fetchHistory();
  let taskStartedMs = 0;
  return (history.events ?? []).flatMap((e) => {
    switch (e.eventType) {
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
        return [`started ${e.workflowExecutionStartedEventAttributes?.workflowType?.name}`];
      case EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
        taskStartedMs = msOf(e.eventTime);
        return [];
      case EventType.EVENT_TYPE_TIMER_STARTED: {
        const lengthMs = msOf(e.timerStartedEventAttributes?.startToFireTimeout);
        const endsAtExpiry = Math.abs(Math.floor(taskStartedMs) + lengthMs - expiresAtMs) <= 1;
        return [`timer ${endsAtExpiry ? 'to expires_at' : `${Math.ceil(lengthMs / 1000)} s`}: ${summaryOf(e)}`];
      }
      case EventType.EVENT_TYPE_TIMER_FIRED:
        return ['timer fired'];
      case EventType.EVENT_TYPE_TIMER_CANCELED:
        return ['timer canceled'];
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
        return [`signal ${e.workflowExecutionSignaledEventAttributes?.signalName}`];
      case EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        return [`activity ${e.activityTaskScheduledEventAttributes?.activityType?.name}: ${summaryOf(e)}`];
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
        return ['completed'];
      default:
        return [];
    }
  });
}

let merchant: Awaited<ReturnType<typeof buildMerchant>>;
beforeAll(async () => {
  merchant = await buildMerchant(stack.db);
});

it('starts the session workflow on create, with the session id as its workflow id', async () => {
  const session = await createExpiringIn(merchant.secretKey, 30 * MINUTE);
  const description = await stack.env.client.workflow.getHandle(session.id).describe();
  expect(description).toMatchObject({ workflowId: session.id, type: 'sessionWorkflow', taskQueue: stack.taskQueue });
  expect(description.status.name).toBe('RUNNING');
  await until(async () => (await historyOf(session.id)).length === 2, 'the first workflow task');
  expect(await historyOf(session.id)).toEqual(['started sessionWorkflow', TIMER_TO_EXPIRES_AT]);
});

it('expires the session exactly at expires_at, not before, with one checkout.session.expired event', async () => {
  const session = await createExpiringIn(merchant.secretKey, 10 * MINUTE);
  await sleepToJustBefore(session.id);
  expect(await status(merchant.secretKey, session.id)).toBe('open');
  expect(await expiredEvents(session.id)).toHaveLength(0);

  await stack.env.sleep(2 * SECOND);
  await until(async () => (await status(merchant.secretKey, session.id)) === 'expired', 'the expiry');
  await until(async () => (await workflowStatus(session.id)) === 'COMPLETED', 'the workflow to end');
  const events = await expiredEvents(session.id);
  expect(events).toHaveLength(1);
  expect(events[0].data_object).toMatchObject({ id: session.id, status: 'expired' });
  expect(await historyOf(session.id)).toEqual([
    'started sessionWorkflow',
    TIMER_TO_EXPIRES_AT,
    'timer fired',
    'activity expireSession: expire the session if it is still open',
    'completed',
  ]);
  await keepHistory(stack, session.id, 'session/expiry');
});

it('expires a session created without expires_at 60 minutes after creation', async () => {
  const session = await createExpiringIn(merchant.secretKey, null);
  const row = await stack.db('checkout_sessions').where({ id: session.id }).first('created_at', 'expires_at');
  expect(new Date(row.expires_at).getTime() - new Date(row.created_at).getTime()).toBe(60 * MINUTE);
  await sleepToJustBefore(session.id);
  expect(await status(merchant.secretKey, session.id)).toBe('open');
  await stack.env.sleep(2 * SECOND);
  await until(async () => (await status(merchant.secretKey, session.id)) === 'expired', 'the expiry');
  expect(await expiredEvents(session.id)).toHaveLength(1);
});

it('expires a 24-hour session after 24 hours', async () => {
  const session = await createExpiringIn(merchant.secretKey, 24 * HOUR);
  await sleepToJustBefore(session.id);
  expect(await status(merchant.secretKey, session.id)).toBe('open');
  await stack.env.sleep(2 * SECOND);
  await until(async () => (await status(merchant.secretKey, session.id)) === 'expired', 'the expiry');
  expect(await expiredEvents(session.id)).toHaveLength(1);
});

it('emits nothing more once expired: time passing and /expire leave one event', async () => {
  const session = await createExpiringIn(merchant.secretKey, 5 * MINUTE);
  await stack.env.sleep(5 * MINUTE + SECOND);
  await until(async () => (await status(merchant.secretKey, session.id)) === 'expired', 'the expiry');
  const res = await expire(merchant.secretKey, session.id);
  expect(res.status).toBe(409);
  expect(res.body.error.code).toBe('session_not_open');
  await stack.env.sleep(24 * HOUR);
  expect(await expiredEvents(session.id)).toHaveLength(1);
});

it('ends the workflow and its timer when /expire expires the session first', async () => {
  const session = await createExpiringIn(merchant.secretKey, 30 * MINUTE);
  expect((await expire(merchant.secretKey, session.id)).status).toBe(200);
  await until(async () => (await workflowStatus(session.id)) === 'COMPLETED', 'the workflow to end');
  expect(await stack.env.client.workflow.getHandle(session.id).result()).toBe('expired');
  expect(await historyOf(session.id)).toEqual([
    'started sessionWorkflow',
    TIMER_TO_EXPIRES_AT,
    'signal sessionSettled',
    'timer canceled',
    'completed',
  ]);
  expect(await expiredEvents(session.id)).toHaveLength(1);
  await keepHistory(stack, session.id, 'session/expire-api-first');
});

it("ends a replaced session's workflow when a create at another price expires it", async () => {
  const first = await createExpiringIn(merchant.secretKey, 30 * MINUTE);
  const second = await createExpiringIn(merchant.secretKey, 30 * MINUTE, {
    reference_id: first.reference_id,
    amount: 9001,
    line_items: [{ label: 'Book', amount: 9001, type: 'charge' }],
  });
  await until(async () => (await workflowStatus(first.id)) === 'COMPLETED', 'the replaced workflow to end');
  expect(await historyOf(first.id)).toContain('signal sessionSettled');
  expect(await workflowStatus(second.id)).toBe('RUNNING');
  await keepHistory(stack, first.id, 'session/replaced-at-another-price');
});

it('yields one transition and one event when /expire races the timer', async () => {
  const sessions = [];
  for (let i = 0; i < 6; i++) sessions.push(await createExpiringIn(merchant.secretKey, 20 * MINUTE));
  await stack.env.sleep(20 * MINUTE - SECOND);
  const answers: TestResponse[] = [];
  await Promise.all([
    stack.env.sleep(2 * SECOND),
    ...sessions.map(async (s, i) => {
      await new Promise((r) => setTimeout(r, i * 15)); // spread the calls across the timer's firing
      answers.push(await expire(merchant.secretKey, s.id));
    }),
  ]);
  for (const res of answers) {
    expect([200, 409]).toContain(res.status);
    if (res.status === 409) expect(res.body.error.code).toBe('session_not_open');
  }
  for (const s of sessions) {
    await until(async () => (await workflowStatus(s.id)) === 'COMPLETED', 'the workflow to end');
    expect(await status(merchant.secretKey, s.id)).toBe('expired');
    expect(await expiredEvents(s.id)).toHaveLength(1);
  }
  for (const [i, s] of sessions.entries()) await keepHistory(stack, s.id, `session/expire-races-timer-${i + 1}`);
});

it('lets exactly one of the expiry activity and /expire win when they run at the same instant', async () => {
  const activities = createSessionActivities({
    db: stack.db,
    clock: stack.clock,
    publicBaseUrl: stack.settings.PUBLIC_BASE_URL,
  });
  for (let i = 0; i < 10; i++) {
    const s = await createExpiringIn(merchant.secretKey, HOUR);
    const [fromTimer, fromApi] = await Promise.all([
      activities.expireSession({ sessionId: s.id }),
      expire(merchant.secretKey, s.id),
    ]);
    expect(fromTimer.status).toBe('expired');
    expect(Number(fromTimer.changed) + Number(fromApi.status === 200)).toBe(1);
    expect(await expiredEvents(s.id)).toHaveLength(1);
  }
});

it('makes the expiry activity idempotent: a retry finds the session expired and writes nothing', async () => {
  const activities = createSessionActivities({
    db: stack.db,
    clock: stack.clock,
    publicBaseUrl: stack.settings.PUBLIC_BASE_URL,
  });
  const session = await createExpiringIn(merchant.secretKey, HOUR);
  expect(await activities.expireSession({ sessionId: session.id })).toEqual({ status: 'expired', changed: true });
  expect(await activities.expireSession({ sessionId: session.id })).toEqual({ status: 'expired', changed: false });
  expect(await activities.expireSession({ sessionId: 'cs_test_missing' })).toEqual({
    status: 'missing',
    changed: false,
  });
  expect(await expiredEvents(session.id)).toHaveLength(1);
});
