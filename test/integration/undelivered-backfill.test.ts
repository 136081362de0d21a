import { listEvents } from '../../src/checkout/events';
import { run as ops } from '../../src/cli/run';
import { loadSettings } from '../../src/config';
import { type Db, migrateUpTo, migrateUpToBefore } from '../../src/db/knex';
import { randomString, timeOrderedBody } from '../../src/lib/ids';
import { createMerchant } from '../../src/ops/merchants';
import { recordAttempts } from '../../src/webhooks/record';
import { backfillUndelivered } from '../../migrations/20261126050000_undelivered_backfill';
import { ownDatabase } from '../helpers/services';

/**
 * The backfill of `webhook_undelivered` (migrations/20261126050000_undelivered_backfill.ts) on a
 * database whose attempts were recorded before the list existed: it lists exactly the pairs
 * src/webhooks/record.ts would have listed, within retention, is harmless run again, and a success
 * recorded while it runs leaves its pair unlisted.
 */
const DAY = 24 * 60 * 60 * 1000;
const MINUTE = 60_000;
const NOW = Date.now();

// Ids whose clock part is their event's time, made oldest first (ids only go forward).
const ages = {
  pastRetention: 31 * DAY,
  failedOnly: 50 * MINUTE,
  failedThenDelivered: 40 * MINUTE,
  deliveredThenRedeliveryFailed: 30 * MINUTE,
  refusedDisabled: 20 * MINUTE,
  cancelledDeleted: 15 * MINUTE,
  endpointGone: 10 * MINUTE,
  deliveredDuringBackfill: 5 * MINUTE,
  failedDuringDeploy: 2 * MINUTE,
} as const;
type Case = keyof typeof ages | 'inDailyPartition';
const at: Record<Case, Date> = {
  ...(Object.fromEntries(Object.entries(ages).map(([c, age]) => [c, new Date(NOW - age)])) as Record<
    keyof typeof ages,
    Date
  >),
  // After the cut-over day: in a daily partition of the event log, not the legacy one.
  inDailyPartition: new Date(NOW + 3 * DAY),
};
const ids = Object.fromEntries(
  (Object.keys(at) as Case[])
    .sort((a, b) => at[a].getTime() - at[b].getTime())
    .map((c) => [c, `evt_test_${timeOrderedBody(at[c].getTime())}`]),
) as Record<Case, string>;

const ENABLED = `we_test_bf${randomString(8)}`;
const DISABLED = `we_test_bfoff${randomString(8)}`;
const GONE = `we_test_bfgone${randomString(8)}`;

interface Attempt {
  endpoint: string;
  generation?: number;
  attemptNo: number;
  /** null: delivered. */
  error: string | null;
  /** False for a refusal or cancellation (no delivered_at), as the recorder writes them. */
  attempted?: boolean;
}

/** Writes an event and its attempts with SQL, as the recorder wrote them before the list existed. */
async function writeEvent(db: Db, merchantId: string, c: Case, attempts: Attempt[]): Promise<void> {
  await db('events').insert({
    id: ids[c],
    merchant_id: merchantId,
    mode: 'test',
    type: 'checkout.session.completed',
    data_object: JSON.stringify({ id: `cs_test_${c}`, object: 'checkout.session' }),
    created_at: at[c],
    dispatched_at: at[c],
  });
  for (const a of attempts) {
    const attempted = a.attempted ?? true;
    await db('event_deliveries').insert({
      event_id: ids[c],
      endpoint_id: a.endpoint,
      generation: a.generation ?? 0,
      attempt_no: a.attemptNo,
      merchant_id: merchantId,
      mode: 'test',
      status_code: a.error === null ? 200 : a.error === 'http_500' ? 500 : null,
      error: a.error,
      delivered_at: attempted ? at[c] : null,
    });
  }
}

const failed = (endpoint: string, attemptNo: number, generation = 0): Attempt => ({
  endpoint,
  generation,
  attemptNo,
  error: 'http_500',
});
const delivered = (endpoint: string, attemptNo: number, generation = 0): Attempt => ({
  endpoint,
  generation,
  attemptNo,
  error: null,
});

/** The merchant's `delivery_success=false` list (the API's query) and its `webhook_undelivered` rows. */
async function undelivered(db: Db, merchantId: string) {
  const page = await listEvents(db, { merchantId, mode: 'test' }, { deliverySuccess: false, limit: 100 });
  const rows = await db('webhook_undelivered')
    .where({ merchant_id: merchantId })
    .orderBy(['event_id', 'endpoint_id'])
    .select('event_id', 'endpoint_id', 'merchant_id', 'mode', 'event_created_at');
  return { listed: page.rows.map((r) => r.id), rows };
}

describe('the undelivered backfill', () => {
  let own: Awaited<ReturnType<typeof ownDatabase>>;
  let db: Db;
  let merchantId: string;
  beforeAll(async () => {
    own = await ownDatabase({ migrated: false });
    db = own.db;
  });
  afterAll(() => own.drop());

  const upToBefore = (migration: string) => migrateUpToBefore(db, migration);
  const upTo = (migration: string) => migrateUpTo(db, migration);

  it('lists exactly the pairs the recorder would have, within retention; a second run changes nothing', async () => {
    // Before the list existed (the previous release's schema): the attempts of the last 30 days.
    await upTo('20261125115000');
    ({ merchant_id: merchantId } = await createMerchant(db, {
      name: 'Before the list',
      returnHosts: ['shop.example.com'],
      methods: ['test'],
      testMerchant: true,
    }));
    for (const [id, status] of [
      [ENABLED, 'enabled'],
      [DISABLED, 'disabled'],
    ]) {
      await db('webhook_endpoints').insert({
        id,
        merchant_id: merchantId,
        mode: 'test',
        url: 'https://hooks.example.com/in',
        events: JSON.stringify(['*']),
        status,
        secret_ciphertext: 'unused',
      });
    }
    await writeEvent(db, merchantId, 'pastRetention', [failed(ENABLED, 1)]);
    // Failed at one endpoint and delivered at another: listed once, for the one.
    await writeEvent(db, merchantId, 'failedOnly', [failed(ENABLED, 1), failed(ENABLED, 2), delivered(DISABLED, 1)]);
    await writeEvent(db, merchantId, 'failedThenDelivered', [failed(ENABLED, 1), delivered(ENABLED, 2)]);
    await writeEvent(db, merchantId, 'deliveredThenRedeliveryFailed', [delivered(ENABLED, 1), failed(ENABLED, 1, 7)]);
    await writeEvent(db, merchantId, 'refusedDisabled', [
      failed(DISABLED, 1),
      { endpoint: DISABLED, attemptNo: 2, error: 'endpoint_disabled', attempted: false },
    ]);
    await writeEvent(db, merchantId, 'cancelledDeleted', [
      { endpoint: ENABLED, attemptNo: 1, error: 'endpoint_deleted', attempted: false },
    ]);
    await writeEvent(db, merchantId, 'endpointGone', [failed(GONE, 1)]);
    await writeEvent(db, merchantId, 'deliveredDuringBackfill', [failed(ENABLED, 1)]);

    // Up to just before the backfill; the janitor has moved the cutoff; one more event lands in a day.
    await upToBefore('20261126050000');
    await db('event_log_retention').update({ cutoff: new Date(NOW - 30 * DAY) });
    await writeEvent(db, merchantId, 'inDailyPartition', [failed(ENABLED, 1)]);
    expect(await undelivered(db, merchantId)).toEqual({ listed: [], rows: [] });

    await upTo('20261126050000');
    const expected = {
      // Newest first, as the list pages.
      listed: [ids.inDailyPartition, ids.deliveredDuringBackfill, ids.refusedDisabled, ids.failedOnly],
      rows: [
        ['failedOnly', ENABLED],
        ['refusedDisabled', DISABLED],
        ['deliveredDuringBackfill', ENABLED],
        ['inDailyPartition', ENABLED],
      ].map(([c, endpoint]) => ({
        event_id: ids[c as Case],
        endpoint_id: endpoint,
        merchant_id: merchantId,
        mode: 'test',
        event_created_at: at[c as Case],
      })),
    };
    expect(await undelivered(db, merchantId)).toEqual(expected);

    // Again, whole and in chunks of one and two rows (chunks end at whole events): nothing changes.
    expect(await backfillUndelivered(db)).toBe(0);
    expect(await backfillUndelivered(db, 1)).toBe(0);
    expect(await backfillUndelivered(db, 2)).toBe(0);
    expect(await undelivered(db, merchantId)).toEqual(expected);

    // From an empty list in chunks of two rows: the same pairs.
    await db('webhook_undelivered').delete();
    expect(await backfillUndelivered(db, 2)).toBe(4);
    expect(await undelivered(db, merchantId)).toEqual(expected);

    // What the previous release records after the backfill (it does not keep the list): a success
    // of a listed pair, and a failure. `ops webhook-endpoint reconcile-undelivered` catches up.
    await db('webhook_undelivered').insert({
      event_id: ids.failedThenDelivered,
      endpoint_id: ENABLED,
      merchant_id: merchantId,
      mode: 'test',
      event_created_at: at.failedThenDelivered,
    });
    await writeEvent(db, merchantId, 'failedDuringDeploy', [failed(ENABLED, 1)]);
    const settings = loadSettings({ DATABASE_URL: 'postgres://unused', PUBLIC_BASE_URL: 'http://api.test:4000' });
    const result = await ops(['webhook-endpoint', 'reconcile-undelivered', '--json'], { db, settings });
    expect([result.exitCode, JSON.parse(result.stdout)]).toEqual([0, { listed: 1 }]);
    expect(await undelivered(db, merchantId)).toEqual({
      listed: [ids.inDailyPartition, ids.failedDuringDeploy, ...expected.listed.slice(1)],
      rows: [
        ...expected.rows.slice(0, 3),
        {
          event_id: ids.failedDuringDeploy,
          endpoint_id: ENABLED,
          merchant_id: merchantId,
          mode: 'test',
          event_created_at: at.failedDuringDeploy,
        },
        expected.rows[3],
      ],
    });
  });

  it('leaves unlisted a pair whose success the recorder commits while the backfill runs', async () => {
    await db('webhook_undelivered').where({ event_id: ids.deliveredDuringBackfill }).delete();
    let commit!: () => void;
    const gate = new Promise<void>((resolve) => (commit = resolve));
    let recorded!: () => void;
    const inserted = new Promise<void>((resolve) => (recorded = resolve));
    // The real recorder, its commit held back: the success, the endpoint's row update, the list's delete.
    const recorder = db.transaction(async (trx) => {
      const results = await recordAttempts(
        trx,
        ENABLED,
        [
          {
            eventId: ids.deliveredDuringBackfill,
            generation: 0,
            attemptNo: 2,
            event: { merchant_id: merchantId, mode: 'test' },
            statusCode: 200,
            error: null,
            attempted: true,
          },
        ],
        NOW,
      );
      expect([...results.values()].map((r) => r.outcome)).toEqual(['delivered']);
      recorded();
      await gate;
    });
    await inserted;
    let finished = false;
    const backfill = backfillUndelivered(db).finally(() => (finished = true));
    // The backfill reads the pair as failed only (the success is not committed) and waits for the endpoint's row.
    const waitingForRow = async () =>
      (
        await db.raw(
          `SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FOR SHARE%'`,
        )
      ).rows[0].n === 1;
    for (let i = 0; i < 100 && !finished && !(await waitingForRow()); i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(finished).toBe(false);
    commit();
    await recorder;
    expect(await backfill).toBe(0);
    expect(
      await db('webhook_undelivered').where({ event_id: ids.deliveredDuringBackfill }).select('endpoint_id'),
    ).toEqual([]);
    expect((await undelivered(db, merchantId)).listed).toEqual([
      ids.inDailyPartition,
      ids.failedDuringDeploy,
      ids.refusedDisabled,
      ids.failedOnly,
    ]);
  });
});
