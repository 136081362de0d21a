import { temporal } from '@temporalio/proto';
import { settleAttempt } from '../../src/checkout/attempts/transitions';
import { defaultGateways, Gateways, testGateway } from '../../src/checkout/gateways';
import { merchantIdKey, modeKey, referenceIdKey, sessionStatusKey } from '../../src/temporal/search-attributes';
import { attemptSchedule, signalDecision, startSessionWorkflow } from '../../src/temporal/session';
import { buildMerchant } from '../helpers/factories';
import { call } from '../helpers/http';
import {
  createSession,
  historyOf,
  MINUTE,
  payableBody,
  SECOND,
  sessionEvents,
  shopper,
  sideApi,
  until,
  untilHistoryEndsWith,
  withFrozenClock,
} from '../helpers/checkout-payments';
import { keepHistory } from '../helpers/histories';
import { EXPECTED_FAILURE, startStack, Stack } from '../helpers/stack';

/**
 * The session workflow's deadlines come from recorded times (`expires_at`, each attempt's
 * `created_at`), not from when a worker first ran it; its history is bounded by continue-as-new;
 * only test-gateway attempts are settled by buttons; and an operator finds and reads it in the
 * Temporal UI (search attributes, summary, current details). Time-skipping server, workflow time
 * read from the events' own timestamps.
 */
// Skipped days of workflow time still run every activity and workflow task in real time.
jest.setTimeout(180_000);

let stack: Stack;
let m: Awaited<ReturnType<typeof buildMerchant>>;
let merchantName: string;
let pub: ReturnType<typeof shopper>;
beforeAll(async () => {
  stack = await startStack();
  m = await buildMerchant(stack.db, { name: 'Deadline Books' });
  merchantName = 'Deadline Books';
  pub = shopper(stack, m.publishableKey);
});
afterAll(() => stack.stop());

const EventType = temporal.api.enums.v1.EventType;
type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

const sessionRead = async (id: string) =>
  (await call(stack.baseUrl, 'GET', `/v1/checkout/sessions/${id}`, { key: m.secretKey })).body;
const attemptRow = (id: string) => stack.db('payment_attempts').where({ id }).first();
const settle = () => new Promise((r) => setTimeout(r, 300));

/** The events of the workflow's current run. */
async function eventsOf(workflowId: string, runId?: string): Promise<HistoryEvent[]> {
  return (await stack.env.client.workflow.getHandle(workflowId, runId).fetchHistory()).events ?? [];
}
const eventMs = (e: HistoryEvent) => Number(e.eventTime!.seconds) * 1000 + Math.round(Number(e.eventTime!.nanos) / 1e6);
const timerSeconds = (e: HistoryEvent) => {
  const t = e.timerStartedEventAttributes!.startToFireTimeout!;
  return Number(t.seconds ?? 0) + Number(t.nanos ?? 0) / 1e9;
};
const activityScheduled = (events: HistoryEvent[], name: string) =>
  events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === name);
/** Each settle of an attempt: an activity scheduled (runs from before patch session-local-settle) or a local activity's marker. */
const settleEvents = (events: HistoryEvent[]) =>
  events.filter(
    (e) =>
      e.activityTaskScheduledEventAttributes?.activityType?.name === 'settleAttempt' ||
      (e.eventType === EventType.EVENT_TYPE_MARKER_RECORDED &&
        e.markerRecordedEventAttributes?.markerName === 'core_local_activity'),
  );

describe('deadlines on recorded times', () => {
  it('expires at expires_at (±1 s of workflow time) when the worker first runs the workflow 10 minutes after the create', async () => {
    const side = await sideApi(stack);
    try {
      await side.stopWorker();
      // The create happened 10 minutes ago (on the app's clock) while no worker ran: a 60-minute session.
      // The time-skipping server cannot skip past a task no worker has taken, so the outage is the
      // app clock's: to the workflow this is the same as a first workflow task 10 minutes late.
      const workerBack = await stack.env.currentTimeMs();
      const s = await withFrozenClock(stack, new Date(workerBack - 10 * MINUTE), () =>
        side.createSession(m.secretKey, payableBody()),
      );
      const expiresAtMs = Date.parse(s.expires_at);
      expect(expiresAtMs - Date.parse(s.created_at)).toBe(60 * MINUTE);
      await side.startWorker();
      await until(async () => (await historyOf(stack, s.id)).length === 2, 'the first workflow task');
      // The timer runs to expires_at from the first workflow task (the workflow's now is the task's start).
      const first = await eventsOf(s.id);
      const [task] = first.filter((e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED);
      const [timer] = first.filter((e) => e.eventType === EventType.EVENT_TYPE_TIMER_STARTED);
      expect(Math.abs(eventMs(task) + timerSeconds(timer) * 1000 - expiresAtMs)).toBeLessThanOrEqual(SECOND);
      expect(timerSeconds(timer)).toBeGreaterThan(50 * 60 - 30);

      await stack.env.sleep(expiresAtMs - (await stack.env.currentTimeMs()) - 2 * SECOND);
      await settle();
      expect((await sessionRead(s.id)).status).toBe('open');
      await stack.env.sleep(3 * SECOND);
      await until(async () => (await sessionRead(s.id)).status === 'expired', 'the expiry');
      const [fired] = (await eventsOf(s.id)).filter((e) => e.eventType === EventType.EVENT_TYPE_TIMER_FIRED);
      expect(Math.abs(eventMs(fired) - expiresAtMs)).toBeLessThanOrEqual(SECOND);
      // Not late by the outage (10 minutes); the activity's own write follows the timer by its run time.
      const expired = await sessionEvents(stack.db, s.id, 'checkout.session.expired');
      expect(expired).toHaveLength(1);
      expect(new Date(expired[0].created_at).getTime() - expiresAtMs).toBeLessThan(10 * SECOND);
      await keepHistory(stack, s.id, 'session/expiry-from-expires-at');
    } finally {
      await side.close();
    }
  });

  it("fails a 002 attempt whose re-check keeps failing with timeout 24 h (±1 s) after the attempt's recorded start", async () => {
    const unreachable: Gateways = {
      ...defaultGateways,
      test: {
        ...testGateway,
        async check() {
          throw new Error(`vendor unreachable ${EXPECTED_FAILURE}`);
        },
      },
    };
    const side = await sideApi(stack, { workerGateways: unreachable });
    try {
      const sidePub = shopper(side, m.publishableKey);
      const s = await side.createSession(m.secretKey, payableBody({ amount: 25002 }));
      const res = await sidePub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test' } });
      expect(res.status).toBe(201);
      const attemptId: string = res.body.attempt_id;
      await sidePub('GET', `/attempts/${attemptId}`); // back without a button: the amount rule says pending
      await untilHistoryEndsWith(
        stack,
        s.id,
        `timer ${attemptSchedule.recheckBackoffMs[0] / SECOND} s: re-check backoff (fails with timeout 24 h after the attempt began)`,
      );
      const startedAtMs = (await attemptRow(attemptId)).created_at.getTime();

      await stack.env.sleep(attemptSchedule.timeoutMs - 2 * SECOND);
      await settle();
      expect((await attemptRow(attemptId)).status).toBe('pending');
      await stack.env.sleep(3 * SECOND);
      await until(async () => (await attemptRow(attemptId)).status === 'failed', 'the timeout');
      expect((await attemptRow(attemptId)).failure_reason).toBe('timeout');
      const events = await eventsOf(s.id);
      // One re-check, retried until the attempt's 24 hours were up, then settled with timeout.
      const rechecks = activityScheduled(events, 'recheckAttempt');
      expect(rechecks).toHaveLength(1);
      const ended = events.filter((e) =>
        [EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT, EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED].includes(
          e.eventType!,
        ),
      );
      expect(ended).toHaveLength(1);
      // Its retries stop by the attempt's deadline (the server gives up before a retry that would pass it).
      expect(eventMs(ended[0])).toBeLessThanOrEqual(startedAtMs + attemptSchedule.timeoutMs + SECOND);
      // The workflow task that settled it was due (its timer fired) at the 24 hours.
      // The settle: a local activity's marker (patch session-local-settle), recorded after its task.
      const [settled] = settleEvents(events);
      const due = events.filter(
        (e) =>
          e.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED && Number(e.eventId) < Number(settled.eventId),
      );
      expect(Math.abs(eventMs(due.at(-1)!) - (startedAtMs + attemptSchedule.timeoutMs))).toBeLessThanOrEqual(SECOND);
      const failed = await sessionEvents(stack.db, s.id, 'payment.attempt.failed');
      expect(failed.map((e) => e.data_object.failed_attempt.reason)).toEqual(['timeout']);
      await keepHistory(stack, s.id, 'session/002-recheck-failing-then-timeout');
    } finally {
      await side.close();
    }
  }, 240_000); // a day of re-check retries, each a real activity run

  it('expires the session at expires_at when the "attempt resolved" signal was lost', async () => {
    const s = await createSession(stack, m.secretKey, payableBody({ expires_at: inMinutes(10) }));
    const res = await pub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test' } });
    const attemptId: string = res.body.attempt_id;
    await until(async () => (await historyOf(stack, s.id)).some((l) => l.includes('or expires_at')), 'the wait');
    // Settled outside the workflow (as a failed initiation is), and the signal that says so never arrives.
    await settleAttempt(stack.db, {
      attemptId,
      outcome: 'failed',
      reason: 'gateway_error',
      expireIfDue: false,
      now: stack.clock(),
      publicBaseUrl: stack.settings.PUBLIC_BASE_URL,
    });
    expect((await sessionRead(s.id)).status).toBe('open');
    await stack.env.sleep(10 * MINUTE + SECOND);
    await until(async () => (await sessionRead(s.id)).status === 'expired', 'the expiry');
    // The wait woke at expires_at and looked at the session, which the lost signal had left open.
    const events = await eventsOf(s.id);
    const fired = events.filter((e) => e.eventType === EventType.EVENT_TYPE_TIMER_FIRED).at(-1)!;
    expect(Math.abs(eventMs(fired) - Date.parse(s.expires_at))).toBeLessThanOrEqual(SECOND);
    const [expire] = activityScheduled(events, 'expireSession');
    expect(eventMs(expire) - Date.parse(s.expires_at)).toBeLessThan(MINUTE);
    expect(await stack.env.client.workflow.getHandle(s.id).result()).toBe('expired');
    await keepHistory(stack, s.id, 'session/attempt-resolved-signal-lost');
  });
});

/** `expires_at` this many minutes from now (app clock, which follows Temporal's). */
const inMinutes = (n: number) => new Date(stack.clock().getTime() + n * MINUTE).toISOString();

describe('bounded history', () => {
  it('continues as new past its history bound, carrying attempts and expires_at', async () => {
    const s = await createSession(stack, m.secretKey, payableBody({ expires_at: inMinutes(30) }));
    // The same session's workflow with a small bound (the create started it with the default; the
    // test server leaves time locked for good if a run ends while its workflow task is out).
    await until(async () => (await historyOf(stack, s.id)).length === 2, 'the first workflow task');
    await stack.env.client.workflow.getHandle(s.id).terminate('restarted with a small history bound');
    await startSessionWorkflow(stack.env.client, stack.taskQueue, {
      sessionId: s.id,
      expiresAtMs: Date.parse(s.expires_at),
      merchantId: m.merchantId,
      mode: 'test',
      referenceId: s.reference_id,
      amount: s.amount,
      currency: s.currency,
      historyBound: 30,
    });
    const firstRun = (await stack.env.client.workflow.getHandle(s.id).describe()).runId;
    const attempts: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await pub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test' } });
      expect(res.status).toBe(201);
      attempts.push(res.body.attempt_id);
      await pub('POST', `/test-gateway/${res.body.attempt_id}/decide`, { body: { decision: 'failed' } });
      await until(async () => (await attemptRow(res.body.attempt_id)).status === 'failed', 'the failure');
      await until(async () => (await sessionRead(s.id)).status === 'open', 'the session open again');
    }
    const first = await eventsOf(s.id, firstRun);
    expect(first.at(-1)?.eventType).toBe(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW);
    const description = await stack.env.client.workflow.getHandle(s.id).describe();
    expect(description.runId).not.toBe(firstRun);
    expect(description.typedSearchAttributes.get(referenceIdKey)).toBe(s.reference_id);

    // The carried deadline: open at expires_at − 1 s, expired at + 1 s.
    const leftMs = Date.parse(s.expires_at) - (await stack.env.currentTimeMs());
    await stack.env.sleep(leftMs - 2 * SECOND);
    await settle();
    expect((await sessionRead(s.id)).status).toBe('open');
    await stack.env.sleep(3 * SECOND);
    await until(async () => (await sessionRead(s.id)).status === 'expired', 'the expiry');
    expect(await stack.env.client.workflow.getHandle(s.id).result()).toBe('expired');
    expect(await sessionEvents(stack.db, s.id, 'payment.attempt.failed')).toHaveLength(3);
    await keepHistory(stack, s.id, 'session/continue-as-new');
  });
});

describe('only test-gateway attempts are settled by buttons', () => {
  it('ignores a button signalled for an attempt at another vendor', async () => {
    const acme = { ...testGateway, name: 'acme' };
    const side = await sideApi(stack, { adapters: { gateways: { ...defaultGateways, test: acme } } });
    try {
      const sidePub = shopper(side, m.publishableKey);
      const s = await side.createSession(m.secretKey, payableBody());
      const res = await sidePub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test' } });
      expect(res.status).toBe(201);
      const attemptId: string = res.body.attempt_id;
      expect((await attemptRow(attemptId)).gateway).toBe('acme');
      // The page refuses it; a signal sent anyway (a bug, a replayed message) must not settle it.
      expect(
        (await sidePub('POST', `/test-gateway/${attemptId}/decide`, { body: { decision: 'succeeded' } })).status,
      ).toBe(403);
      // The workflow has taken the attempt and waits for the shopper (else the signal lands before that wait).
      await until(
        async () => /^timer \d+ s: until the shopper decides/.test((await historyOf(stack, s.id)).at(-1) ?? ''),
        'the wait for the shopper',
      );
      await signalDecision(stack.env.client, s.id, attemptId, 'succeeded');
      await untilHistoryEndsWith(stack, s.id, 'signal attemptDecision');
      await settle();
      expect(settleEvents(await eventsOf(s.id))).toHaveLength(0);
      expect((await attemptRow(attemptId)).status).toBe('pending');
      expect((await sessionRead(s.id)).status).toBe('processing');
      await keepHistory(stack, s.id, 'session/non-test-gateway-button-ignored');
    } finally {
      await side.close();
    }
  });
});

describe('ops views in the Temporal UI', () => {
  const metadata = (id: string) =>
    stack.env.client.workflow
      .getHandle(id)
      .query<{ currentDetails?: string }>('__temporal_workflow_metadata')
      .then((md) => md.currentDetails ?? '');

  it('starts a session with its search attributes and summary, and keeps SessionStatus and the details current', async () => {
    const s = await createSession(stack, m.secretKey, payableBody({ amount: 25000 }));
    const handle = stack.env.client.workflow.getHandle(s.id);
    let d = await handle.describe();
    expect(d.typedSearchAttributes.get(merchantIdKey)).toBe(m.merchantId);
    expect(d.typedSearchAttributes.get(modeKey)).toBe('test');
    expect(d.typedSearchAttributes.get(referenceIdKey)).toBe(s.reference_id);
    expect(d.typedSearchAttributes.get(sessionStatusKey)).toBe('open');
    expect(await d.staticSummary()).toBe(
      `checkout ${s.reference_id}: 25000 IQD, ${merchantName} (${m.merchantId}), test`,
    );
    await until(async () => (await metadata(s.id)).startsWith('open, no attempt pending'), 'the idle details');

    const res = await pub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test' } });
    const attemptId: string = res.body.attempt_id;
    await until(
      async () => (await handle.describe()).typedSearchAttributes.get(sessionStatusKey) === 'processing',
      'SessionStatus processing',
    );
    await pub('POST', `/test-gateway/${attemptId}/decide`, { body: { decision: 'slow' } });
    await until(
      async () =>
        /^attempt pa_test_\w+ pending, slow button, answer due \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/.test(
          await metadata(s.id),
        ),
      'the slow details',
    );
    await stack.env.sleep(attemptSchedule.slowAnswerMs + SECOND);
    await until(async () => (await attemptRow(attemptId)).status === 'succeeded', 'the success');
    await until(
      async () => (await handle.describe()).typedSearchAttributes.get(sessionStatusKey) === 'completed',
      'SessionStatus completed',
    );
    d = await handle.describe();
    expect(d.status.name).toBe('COMPLETED');
    // Every timer, condition and activity says what it is for.
    const events = await eventsOf(s.id);
    const commands = events.filter((e) =>
      [EventType.EVENT_TYPE_TIMER_STARTED, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED].includes(e.eventType!),
    );
    expect(commands.length).toBeGreaterThan(0);
    for (const e of commands) expect(e.userMetadata?.summary?.data?.length).toBeGreaterThan(0);
    await keepHistory(stack, s.id, 'session/search-attributes-slow-then-succeeds');
  });
});
