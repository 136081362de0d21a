import { createDb, Db } from '../../src/db/knex';
import { BACKLOG_STATEMENT, readBacklogs } from '../../src/telemetry/backlogs';
import { readRunEnv } from '../helpers/stack';

/** The scrape-time backlog gauges read indexes only: a gauge that scans a table slows every scrape as the table grows. */
let db: Db;
beforeAll(() => {
  db = createDb(readRunEnv().databaseUrl, 2);
});
afterAll(() => db.destroy());

it('reads every backlog through an index, never a sequential scan', async () => {
  const plan = await db.transaction(async (trx) => {
    // On the test's small tables the planner would rightly prefer a scan; forbid it to see whether an index serves.
    await trx.raw('SET LOCAL enable_seqscan = off');
    const { rows } = await trx.raw(`EXPLAIN ${BACKLOG_STATEMENT}`);
    return (rows as Array<{ 'QUERY PLAN': string }>).map((r) => r['QUERY PLAN']).join('\n');
  });
  expect(plan).not.toMatch(/Seq Scan/);
  for (const index of ['webhook_queue_pending_age', 'outbox_unsent', 'workflow_handoffs_pkey'])
    expect(plan).toContain(index);
});

it('counts an unsent SMS in the outbox backlog, with its age', async () => {
  const before = await readBacklogs(db);
  await db('outbox').insert({
    kind: 'sms',
    to: '+9647700000001',
    body: 'x',
    created_at: new Date(Date.now() - 3_600_000),
  });
  const after = await readBacklogs(db);
  expect(after.outbox.sms.pending).toBe(before.outbox.sms.pending + 1);
  expect(after.outbox.sms.oldest_pending_age_seconds).toBeGreaterThanOrEqual(3599);
});
