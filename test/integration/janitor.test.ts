import { ApplicationFailure } from '@temporalio/common';
import { createJanitorActivities } from '../../activities/janitor';
import { keepHistory } from '../helpers/histories';
import { startStack, Stack } from '../helpers/stack';

/** The janitor workflow on the time-skipping server: retention sweeps as time passes. */
let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack.stop());

const HOUR = 60 * 60 * 1000;

async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const exists = async (table: string, where: Record<string, unknown>) =>
  (await stack.db(table).where(where).first()) !== undefined;

it('purges idempotency records and rate-limit windows once they are 24 hours old, sweeping hourly', async () => {
  const now = Date.now();
  const scope = `janitor-test-${now}`;
  await stack.db('idempotency_records').insert([
    { scope, key: 'old', route: 'r', body_hash: 'h', state: 'done', created_at: new Date(now - 25 * HOUR) },
    {
      scope,
      key: 'young',
      route: 'r',
      body_hash: 'h',
      state: 'done',
      created_at: new Date(now - 23 * HOUR - 30 * 60 * 1000),
    },
  ]);
  await stack.db('rate_limit_windows').insert([
    { bucket: scope, window_start: new Date(now - 25 * HOUR), count: 3 },
    { bucket: scope, window_start: new Date(now - HOUR), count: 3 },
  ]);

  const handle = await stack.env.client.workflow.start('janitorWorkflow', {
    taskQueue: stack.taskQueue,
    workflowId: `janitor-${now}`,
  });

  await until(async () => !(await exists('idempotency_records', { scope, key: 'old' })), 'the first sweep');
  expect(await exists('idempotency_records', { scope, key: 'young' })).toBe(true);
  expect(await exists('rate_limit_windows', { bucket: scope, window_start: new Date(now - 25 * HOUR) })).toBe(false);
  expect(await exists('rate_limit_windows', { bucket: scope, window_start: new Date(now - HOUR) })).toBe(true);

  // Half an hour later nothing has swept yet; after the hourly timer the young record is 24 h old.
  await stack.env.sleep('30 minutes');
  expect(await exists('idempotency_records', { scope, key: 'young' })).toBe(true);
  await stack.env.sleep('31 minutes');
  await until(async () => !(await exists('idempotency_records', { scope, key: 'young' })), 'the hourly sweep');
  await keepHistory(stack, handle.workflowId, 'janitor/hourly-sweeps');

  await handle.terminate();
});

it('purges SMS bodies (OTP codes) 10 minutes after they were queued, and every outbox row after 30 days', async () => {
  const now = Date.now();
  const to = `+96477${String(now).slice(-8)}`;
  const MINUTE = 60 * 1000;
  const DAY = 24 * HOUR;
  const at = (ms: number) => new Date(now - ms);
  const rows: Array<{ id: number; label: string }> = [];
  for (const [label, row] of [
    ['sent sms, 11 min', { kind: 'sms', body: 'code 111111', sent_at: at(10 * MINUTE), created_at: at(11 * MINUTE) }],
    ['given-up sms, 11 min', { kind: 'sms', body: 'code 222222', next_attempt_at: null, created_at: at(11 * MINUTE) }],
    [
      'test-mode sms, 11 min',
      { kind: 'sms', body: 'code 333333', test_mode: true, next_attempt_at: null, created_at: at(11 * MINUTE) },
    ],
    ['sent sms, 5 min', { kind: 'sms', body: 'code 444444', sent_at: at(4 * MINUTE), created_at: at(5 * MINUTE) }],
    ['email, 29 days', { kind: 'email', subject: 's', body: 'Hello', sent_at: at(29 * DAY), created_at: at(29 * DAY) }],
    ['email, 31 days', { kind: 'email', subject: 's', body: 'Hello', sent_at: at(31 * DAY), created_at: at(31 * DAY) }],
    ['sms, 31 days', { kind: 'sms', body: 'code 555555', created_at: at(31 * DAY) }],
  ] as const) {
    const [{ id }] = await stack
      .db('outbox')
      .insert({ to, ...row })
      .returning('id');
    rows.push({ id, label });
  }
  const state = async () =>
    Object.fromEntries(
      await Promise.all(
        rows.map(async ({ id, label }) => {
          const row = await stack.db('outbox').where({ id }).first('body');
          return [label, row === undefined ? 'deleted' : row.body];
        }),
      ),
    );

  const handle = await stack.env.client.workflow.start('janitorWorkflow', {
    taskQueue: stack.taskQueue,
    workflowId: `janitor-outbox-${now}`,
  });
  await until(async () => (await state())['sms, 31 days'] === 'deleted', 'the first sweep');
  expect(await state()).toEqual({
    'sent sms, 11 min': null,
    'given-up sms, 11 min': null,
    'test-mode sms, 11 min': null,
    'sent sms, 5 min': 'code 444444',
    'email, 29 days': 'Hello',
    'email, 31 days': 'deleted',
    'sms, 31 days': 'deleted',
  });
  await handle.terminate();
});

it('a sweep on a stopping worker purges nothing more and fails retryably, for the next attempt to go on elsewhere', async () => {
  const now = Date.now();
  const scope = `janitor-stop-${now}`;
  await stack.db('idempotency_records').insert({
    scope,
    key: 'old',
    route: 'r',
    body_hash: 'h',
    state: 'done',
    created_at: new Date(now - 25 * HOUR),
  });
  const stopping = new AbortController();
  stopping.abort('SIGTERM');
  const sweep = createJanitorActivities({ db: stack.db, stopping: stopping.signal }).sweepRetention({ nowMs: now });
  const failure = await sweep.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(failure).toBeInstanceOf(ApplicationFailure);
  expect(failure).toMatchObject({ type: 'WorkerStopping', nonRetryable: false });
  expect(await exists('idempotency_records', { scope, key: 'old' })).toBe(true);

  await createJanitorActivities({ db: stack.db, stopping: new AbortController().signal }).sweepRetention({
    nowMs: now,
  });
  expect(await exists('idempotency_records', { scope, key: 'old' })).toBe(false);
});
