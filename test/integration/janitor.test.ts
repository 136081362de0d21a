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

  await handle.terminate();
});
