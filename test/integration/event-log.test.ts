import { readFileSync } from 'node:fs';
import { createJanitorActivities } from '../../activities/janitor';
import { getEvent, idTimeBounds, listEvents } from '../../src/checkout/events';
import { createDb, type Db, migrateLatest, migrateUpTo } from '../../src/db/knex';
import { randomString, timeOrderedBody } from '../../src/lib/ids';
import { createMerchant } from '../../src/ops/merchants';
import { eventDeliveries } from '../../src/webhooks/event-deliveries';
import { RunEnv, runEnvFile } from '../helpers/run-env';
import { ownDatabase } from '../helpers/services';

/**
 * The event log by day (migrations/20261125200000_partitioned_event_log.ts, src/checkout/event-log.ts):
 * a sweep drops the days past retention whole with their deliveries, deletes their pending queue
 * rows (20261126030000_pending_queue), keeps the recent ones readable, keeps a week of days ahead,
 * and is harmless twice or late; the forward migrations of a log with events keep every event,
 * delivery and pending queue row readable.
 */
const DAY = 24 * 60 * 60 * 1000;
const run: RunEnv = JSON.parse(readFileSync(runEnvFile(), 'utf8'));

// Ids whose clock part is their event's time, as newId makes them (made first: ids only go forward).
const NOW = Date.now();
const idAt = (ms: number) => `evt_test_${timeOrderedBody(ms)}`;
const ages = { '31 days': 31 * DAY, '29 days': 29 * DAY, yesterday: DAY, today: 60_000 } as const;
const ids = Object.fromEntries(
  Object.entries(ages)
    .sort(([, a], [, b]) => b - a)
    .map(([label, age]) => [label, idAt(NOW - age)]),
) as Record<keyof typeof ages, string>;

const utcDayName = (ms: number) => new Date(ms).toISOString().slice(0, 10).replace(/-/g, '');

/**
 * The tenant of a delivery row where the schema still requires one (before
 * 20261126041000_delivery_tenant_optional; 20261127120000_delivery_tenant_drop drops the columns).
 */
async function deliveryTenant(db: Db, merchantId: string): Promise<{ merchant_id?: string; mode?: string }> {
  const required = await db('information_schema.columns')
    .where({ table_name: 'event_deliveries', column_name: 'merchant_id', is_nullable: 'NO' })
    .first();
  return required ? { merchant_id: merchantId, mode: 'test' } : {};
}

/** Writes one event of `merchantId` at `at`, with a failed attempt and its retry pending in the queue, as the app does. */
async function writeEvent(db: Db, merchantId: string, id: string, at: Date): Promise<void> {
  await db('events').insert({
    id,
    merchant_id: merchantId,
    mode: 'test',
    type: 'checkout.session.completed',
    data_object: JSON.stringify({ id: `cs_test_${id.slice(-6)}`, object: 'checkout.session' }),
    created_at: at,
    dispatched_at: at,
  });
  await db('event_deliveries').insert({
    event_id: id,
    endpoint_id: 'we_test_log',
    generation: 0,
    attempt_no: 1,
    ...(await deliveryTenant(db, merchantId)),
    status_code: 500,
  });
  await db('webhook_queue').insert({
    event_id: id,
    endpoint_id: 'we_test_log',
    generation: 0,
    attempt_no: 2,
    next_attempt_at: new Date(at.getTime() + 60_000),
  });
}

/** Lists the event as undelivered at an endpoint, as a failed attempt does (src/webhooks/record.ts). */
async function writeUndelivered(db: Db, merchantId: string, id: string, at: Date): Promise<void> {
  await db('webhook_undelivered').insert({
    event_id: id,
    endpoint_id: 'we_test_log',
    merchant_id: merchantId,
    mode: 'test',
    event_created_at: at,
  });
}

/** The ids of the merchant's `delivery_success=false` list, and of its `webhook_undelivered` rows. */
async function undelivered(db: Db, merchantId: string) {
  const page = await listEvents(db, { merchantId, mode: 'test' }, { deliverySuccess: false, limit: 100 });
  const rows = await db('webhook_undelivered').where({ merchant_id: merchantId }).orderBy('event_id');
  return { listed: page.rows.map((r) => r.id), rows: rows.map((r: { event_id: string }) => r.event_id) };
}

/** Whether the event reads back by id (with its delivery), in the merchant's lists, and has its queue row. */
async function readable(db: Db, merchantId: string, id: string) {
  const scope = { merchantId, mode: 'test' as const };
  const event = await getEvent(db, scope, id);
  const page = await listEvents(db, scope, { limit: 100 });
  const ofType = await listEvents(db, scope, { type: 'checkout.session.completed', limit: 100 });
  return {
    byId: event?.id === id,
    inList: page.rows.some((r) => r.id === id),
    inTypeList: ofType.rows.some((r) => r.id === id),
    deliveries: (await eventDeliveries(db, id)).length,
    queued: (await db('webhook_queue').where({ event_id: id })).length,
  };
}

/**
 * Sweeps as of `nowMs`, and again (as the next hourly sweep would) while a partition's DDL found
 * its lock taken: the run's other files read and write the shared event log meanwhile.
 */
async function sweepSettled(sweep: ReturnType<typeof createJanitorActivities>, nowMs: number) {
  for (let i = 0; ; i++) {
    const result = await sweep.sweepRetention({ nowMs });
    if (result.eventLog?.lockTimeouts === 0 || i === 20) return result;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** Whether the UTC day of `ms` has its partitions in both tables. */
async function dayMade(db: Db, ms: number): Promise<boolean> {
  const day = utcDayName(ms);
  const tables = [`events_d${day}`, `event_deliveries_d${day}_live`, `event_deliveries_d${day}_test`];
  return (await Promise.all(tables.map((table) => exists(db, table)))).every(Boolean);
}

/** The daily partitions of `events` a plan reads: named in EXPLAIN ANALYZE and executed. */
async function partitionsRead(db: Db, sql: string, bindings: readonly unknown[]): Promise<string[]> {
  const { rows } = await db.raw(`EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) ${sql}`, bindings as never[]);
  const lines = (rows as Array<{ 'QUERY PLAN': string }>).map((r) => r['QUERY PLAN']);
  return [
    ...new Set(
      lines.filter((l) => !l.includes('never executed')).flatMap((l) => l.match(/\bevents_(d\d{8}|default)\b/g) ?? []),
    ),
  ];
}

const present = { byId: true, inList: true, inTypeList: true, deliveries: 1, queued: 1 };
const gone = { byId: false, inList: false, inTypeList: false, deliveries: 0, queued: 0 };
const exists = async (db: Db, table: string) =>
  (await db.raw('SELECT to_regclass(?) IS NOT NULL AS present', [table])).rows[0].present as boolean;

describe('on a partitioned database', () => {
  // A database of its own: the sweeps below run days ahead, and in the run's shared database they
  // purged other files' rows of those days (a rate-limit window in use: a flaky 429 test).
  let own: Awaited<ReturnType<typeof ownDatabase>>;
  let db: Db;
  let merchantId: string;
  beforeAll(async () => {
    own = await ownDatabase();
    db = own.db;
    ({ merchant_id: merchantId } = await createMerchant(db, {
      name: `Event log ${randomString(6)}`,
      returnHosts: ['shop.example.com'],
      methods: ['test'],
      testMerchant: true,
    }));
    // The day 31 days ago exists (the migration made the days from 31 days back), made again
    // here so that the test says what it relies on.
    await db.raw('SELECT event_log_ensure_day(?::date)', [new Date(NOW - 31 * DAY).toISOString().slice(0, 10)]);
    for (const [label, id] of Object.entries(ids)) {
      await writeEvent(db, merchantId, id, new Date(NOW - ages[label as keyof typeof ages]));
    }
    for (const label of ['31 days', 'today'] as const) {
      await writeUndelivered(db, merchantId, ids[label], new Date(NOW - ages[label]));
    }
  });
  afterAll(() => own.drop());

  it('drops the days past retention whole, keeps the recent ones readable, and a week ahead made', async () => {
    const sweep = createJanitorActivities({ db });
    await sweepSettled(sweep, NOW);

    expect(await readable(db, merchantId, ids['31 days'])).toEqual(gone);
    for (const label of ['29 days', 'yesterday', 'today'] as const) {
      expect([label, await readable(db, merchantId, ids[label])]).toEqual([label, present]);
    }
    expect(await exists(db, `events_d${utcDayName(NOW - 31 * DAY)}`)).toBe(false);
    // No foreign key takes an event's undelivered rows with its day: the sweep deletes them.
    expect(await undelivered(db, merchantId)).toEqual({ listed: [ids.today], rows: [ids.today] });
    // Tomorrow's day exists long before midnight, in both tables, and so does the week after.
    for (const ahead of [1, 7]) expect([ahead, await dayMade(db, NOW + ahead * DAY)]).toEqual([ahead, true]);

    // Twice: nothing more to do. Late (the janitor down for two days): the days it missed go, the rest stay.
    const again = await sweep.sweepRetention({ nowMs: NOW });
    expect(again.eventLog).toEqual({
      daysCreated: 0,
      partitionsDropped: 0,
      legacyEvents: 0,
      legacyDropped: false,
      queueRowsPurged: 0,
      lockTimeouts: 0,
    });
    const late = await sweepSettled(sweep, NOW + 2 * DAY);
    expect([late.eventLog?.lockTimeouts, await dayMade(db, NOW + 9 * DAY)]).toEqual([0, true]);
    expect(await readable(db, merchantId, ids['29 days'])).toEqual(gone);
    for (const label of ['yesterday', 'today'] as const) {
      expect([label, await readable(db, merchantId, ids[label])]).toEqual([label, present]);
    }
  });
});

describe('by-id reads of the event log', () => {
  let db: Db;
  let merchantId: string;
  beforeAll(async () => {
    db = createDb(run.databaseUrl, 2);
    ({ merchant_id: merchantId } = await createMerchant(db, {
      name: `Event log ids ${randomString(6)}`,
      returnHosts: ['shop.example.com'],
      methods: ['test'],
      testMerchant: true,
    }));
  });
  afterAll(() => db.destroy());

  it('read one or two days, by the time in the ids', async () => {
    // Written at least an hour before midnight: the bound reaches an hour past the id's time, and
    // from 23:00 UTC that is tomorrow, a third day (so the test held only 23 hours a day).
    const startOfDay = Math.floor(Date.now() / DAY) * DAY;
    const at = Math.min(Date.now() - 5 * 60_000, startOfDay + 22 * 60 * 60_000);
    const id = idAt(at);
    await writeEvent(db, merchantId, id, new Date(at));
    const bounds = idTimeBounds([id])!;
    // eventsByIds (the delivery activity's claimed rows, webhook_undelivered, dropped deliveries) and getEvent.
    const byIds = db('events').whereIn('id', [id]).whereBetween('created_at', bounds).toSQL();
    const read = await partitionsRead(db, byIds.sql, byIds.bindings);
    expect(read.length).toBeGreaterThanOrEqual(1);
    expect(read.length).toBeLessThanOrEqual(2);
    // Without a bound every day is read: the assertion can fail.
    const unbounded = await partitionsRead(db, 'SELECT * FROM events WHERE id = ?', [id]);
    expect(unbounded.length).toBeGreaterThan(2);
  });

  it('a day made takes over the events written ahead of it into the default partition', async () => {
    // A clock 200 days ahead (as a test file's clock that follows its time-skipping server):
    // no day exists there, so the event lands in events_default.
    const at = new Date(Date.now() + 200 * DAY);
    const id = idAt(Date.now());
    await db('events').insert({
      id,
      merchant_id: merchantId,
      mode: 'test',
      type: 'checkout.session.completed',
      data_object: JSON.stringify({ id: 'cs_test_ahead' }),
      created_at: at,
    });
    const where = async () =>
      (await db.raw('SELECT tableoid::regclass::text AS p FROM events WHERE id = ?', [id])).rows[0]?.p as string;
    expect(await where()).toBe('events_default');
    const day = at.toISOString().slice(0, 10);
    try {
      await db.raw('SELECT event_log_ensure_day(?::date)', [day]);
      expect([await where(), await dayMade(db, at.getTime())]).toEqual([`events_d${utcDayName(at.getTime())}`, true]);
      expect((await getEvent(db, { merchantId, mode: 'test' }, id))?.data_object).toEqual({ id: 'cs_test_ahead' });
    } finally {
      const name = utcDayName(at.getTime());
      await db.raw(
        `DROP TABLE IF EXISTS events_d${name}, event_deliveries_d${name}_live, event_deliveries_d${name}_test`,
      );
    }
  });
});

describe('the forward migration', () => {
  let own: Awaited<ReturnType<typeof ownDatabase>>;
  let db: Db;
  beforeAll(async () => {
    own = await ownDatabase({ migrated: false });
    db = own.db;
  });
  afterAll(() => own.drop());

  it('keeps every event, delivery and queue row of a log with events readable, and new ones land in days', async () => {
    // The schema as it was before, with events of the last 30 days.
    await migrateUpTo(db, '20261124170000');
    const { merchant_id: merchantId } = await createMerchant(db, {
      name: 'Before the cut-over',
      returnHosts: ['shop.example.com'],
      methods: ['test'],
      testMerchant: true,
    });
    for (const label of ['29 days', 'yesterday', 'today'] as const) {
      await writeEvent(db, merchantId, ids[label], new Date(NOW - ages[label]));
    }
    // A delivery over: the queue kept such rows before 20261126030000_pending_queue.
    await db('webhook_queue').insert({
      event_id: ids.today,
      endpoint_id: 'we_test_done',
      generation: 0,
      status: 'delivered',
      next_attempt_at: null,
    });

    await migrateLatest(db);
    for (const label of ['29 days', 'yesterday'] as const) {
      await writeUndelivered(db, merchantId, ids[label], new Date(NOW - ages[label]));
    }
    expect((await undelivered(db, merchantId)).listed).toEqual([ids.yesterday, ids['29 days']]);
    expect(
      (
        await db.raw(
          `SELECT c.relname FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid
            WHERE c.relname IN ('events', 'event_deliveries', 'webhook_queue') ORDER BY 1`,
        )
      ).rows.map((r: { relname: string }) => r.relname),
    ).toEqual(['event_deliveries', 'events']);
    // The queue kept its pending rows (below: queued) and none of the finished ones.
    expect(await db('webhook_queue').where({ endpoint_id: 'we_test_done' })).toEqual([]);
    for (const label of ['29 days', 'yesterday', 'today'] as const) {
      expect([label, await readable(db, merchantId, ids[label])]).toEqual([label, present]);
    }
    // The lists' narrow indexes (20261126040000_event_list_keys), valid, with a copy on every
    // partition (the legacy table's too); the wide ones gone.
    const { rows: indexes } = await db.raw(
      `SELECT c.relname AS name, x.indisvalid AS valid,
              (SELECT count(*)::int FROM pg_partition_tree('events') p
                WHERE p.isleaf AND NOT EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_index y ON y.indexrelid = i.inhrelid
                                                WHERE i.inhparent = c.oid AND y.indrelid = p.relid)) AS missing
         FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid WHERE x.indrelid = 'events'::regclass ORDER BY 1`,
    );
    expect(indexes).toEqual(
      ['events_by_tenant', 'events_by_tenant_type', 'events_pkey', 'events_undispatched_p'].map((name) => ({
        name,
        valid: true,
        missing: 0,
      })),
    );

    // Written afterwards: an event now (before the cut-over day: the old table), one in three days
    // (a daily partition), and another delivery of an old event.
    const later = `evt_test_${timeOrderedBody(NOW + 3 * DAY)}`;
    await writeEvent(db, merchantId, `evt_test_${timeOrderedBody()}`, new Date());
    await writeEvent(db, merchantId, later, new Date(NOW + 3 * DAY));
    const row = await db('events').where({ id: later }).first('tableoid');
    expect((await db.raw('SELECT ?::regclass::text AS t', [row.tableoid])).rows[0].t).toBe(
      `events_d${utcDayName(NOW + 3 * DAY)}`,
    );
    await db('event_deliveries').insert({
      event_id: ids['29 days'],
      endpoint_id: 'we_test_log',
      generation: 0,
      attempt_no: 2,
      ...(await deliveryTenant(db, merchantId)),
    });
    expect(await eventDeliveries(db, ids['29 days'])).toHaveLength(2);

    // Past the API's cutoff, an event is no longer listed as undelivered, even before the sweep
    // deletes its row.
    await db('event_log_retention').update({ cutoff: new Date(NOW - 29 * DAY + 1) });
    expect(await undelivered(db, merchantId)).toEqual({
      listed: [ids.yesterday],
      rows: [ids['29 days'], ids.yesterday],
    });

    // The janitor purges the old table row by row until nothing can land there, then drops it.
    const sweep = createJanitorActivities({ db });
    const first = await sweep.sweepRetention({ nowMs: NOW + 2 * DAY });
    expect(first.events).toBe(1); // 29 days + 2 > 30
    expect(first.undeliveredRows).toBe(1);
    expect(await undelivered(db, merchantId)).toEqual({ listed: [ids.yesterday], rows: [ids.yesterday] });
    expect(await readable(db, merchantId, ids['29 days'])).toEqual(gone);
    expect(await readable(db, merchantId, ids.yesterday)).toEqual(present);
    expect(await exists(db, 'events_legacy')).toBe(true);
    const done = await sweep.sweepRetention({ nowMs: NOW + 33 * DAY });
    expect(done.eventLog?.legacyDropped).toBe(true);
    expect(done.undeliveredRows).toBe(1);
    expect(await exists(db, 'events_legacy')).toBe(false);
    expect(await exists(db, 'events_default')).toBe(true); // the catch-all the legacy table was
    expect(await readable(db, merchantId, later)).toEqual(present);
  });
});
