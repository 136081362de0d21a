import type { Db } from '../../src/db/knex';
import { BACKLOG_STATEMENT, readBacklogs } from '../../src/telemetry/backlogs';
import { ownDatabase } from '../helpers/services';

/** The scrape-time backlog gauges read indexes only: a gauge that scans a table slows every scrape as the table grows. */
// A database of the file's own: the figures are exact, with no other test file's rows in them.
let own: Awaited<ReturnType<typeof ownDatabase>>;
let db: Db;
beforeAll(async () => {
  own = await ownDatabase();
  db = own.db;
});
afterAll(() => own.drop());

it('reads every backlog through an index, never a sequential scan', async () => {
  const plan = await db.transaction(async (trx) => {
    // On the test's small tables the planner would rightly prefer a scan; forbid it to see whether an index serves.
    await trx.raw('SET LOCAL enable_seqscan = off');
    const { rows } = await trx.raw(`EXPLAIN ${BACKLOG_STATEMENT}`);
    return (rows as Array<{ 'QUERY PLAN': string }>).map((r) => r['QUERY PLAN']).join('\n');
  });
  expect(plan).not.toMatch(/Seq Scan/);
  for (const index of ['outbox_unsent', 'workflow_handoffs_pkey']) expect(plan).toContain(index);
  // The oldest due delivery is the first entry of the queue's next_attempt_at index; the count
  // walks any of its indexes, up to the cap.
  expect(plan).toMatch(/Index (?:Only )?Scan using webhook_queue_pending_due on webhook_queue/);
});

it('counts what waits in each queue, with the age of the oldest, and nothing once it is sent', async () => {
  expect(await readBacklogs(db)).toEqual({
    webhook_deliveries_pending: 0,
    webhook_oldest_due_delivery_age_seconds: 0,
    handoffs_pending: 0,
    handoff_oldest_age_seconds: 0,
    outbox: {
      sms: { pending: 0, oldest_pending_age_seconds: 0 },
      email: { pending: 0, oldest_pending_age_seconds: 0 },
    },
  });
  const hourAgo = new Date(Date.now() - 3_600_000);
  const [{ id }] = await db('outbox')
    .insert([
      { kind: 'sms', to: '+9647700000001', body: 'x', created_at: hourAgo },
      { kind: 'sms', to: '+9647700000002', body: 'y' },
    ])
    .returning('id');
  const waiting = await readBacklogs(db);
  expect(waiting.outbox.sms.pending).toBe(2);
  expect(waiting.outbox.sms.oldest_pending_age_seconds).toBeGreaterThanOrEqual(3600);
  expect(waiting.outbox.sms.oldest_pending_age_seconds).toBeLessThan(3660);
  expect(waiting.outbox.email).toEqual({ pending: 0, oldest_pending_age_seconds: 0 });
  await db('outbox').where({ id }).update({ sent_at: new Date(), next_attempt_at: null });
  const sent = await readBacklogs(db);
  expect(sent.outbox.sms.pending).toBe(1);
  expect(sent.outbox.sms.oldest_pending_age_seconds).toBeLessThan(60);
});
