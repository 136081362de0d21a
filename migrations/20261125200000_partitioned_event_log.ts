import type { Knex } from 'knex';

/**
 * The event log by day: `events` partitioned on created_at, `event_deliveries` and `webhook_queue`
 * on their event id (ids are time-ordered: `evt_` or `evt_test_`, then 10 base32 characters of
 * milliseconds), one partition a day (two for the id-keyed tables: live and test ids), so the
 * janitor drops a day whole instead of deleting its rows. The rows an event owns sit in the
 * partition of its id's day, and go with it.
 *
 * On a database with events, without a long outage: each old table becomes the new table's
 * DEFAULT partition (`<table>_legacy`), attached without a scan, holding everything before the
 * cut-over day B (the day after tomorrow, UTC): a CHECK constraint, validated beforehand while
 * writes go on, proves no old row belongs to a daily partition, so neither the attach nor the
 * creation of the days from B on reads a row. The swap itself (rename, create, attach) is one
 * short transaction. Until B, new rows still land in the legacy tables; the janitor purges those in
 * bounded batches and drops them once their newest row is past retention (B + 30 days). On an
 * empty database there is nothing to keep: the old tables are dropped and the days from 31 days
 * ago to a week ahead are created, with an empty DEFAULT partition for events (`events_default`:
 * an event whose created_at has no day yet is kept, not refused). `event_log_retention` holds the
 * cutoff the API hides older events by (the janitor moves it hourly; storage goes by the day).
 *
 * Every column and CHECK constraint the old tables have when this runs (other migrations add
 * nullable columns) is carried by `LIKE … INCLUDING ALL`-style copies, and so are their indexes
 * (rebuilt on the parent from the old definitions), except `events`' primary key, which becomes
 * (id, created_at) as a partitioned table's must hold the partition key, and its plain created_at
 * index, which only the old row-by-row purge used. The foreign keys from deliveries and queue rows
 * to their event go (a partitioned `events` has no unique id alone to point at); rows go with their
 * day instead of by cascade. The merchant foreign key of `events` is not carried: Postgres cannot
 * add one to a partitioned table without validating every old row under a lock.
 */
export const config = { transaction: false };

/**
 * Storage of each day of the webhook queue (a partitioned table has none of its own). Queue rows
 * are updated two or three times each (claimed, then recorded), moving indexed columns
 * (next_attempt_at, claim), so no update is HOT: a day (5 M rows a month at bench:scale's SCALE=1,
 * 8.6 M a day at 100 events/s) is vacuumed at 2 % dead rows rather than the default 20 %.
 */
const QUEUE_STORAGE = 'WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 10000)';

const DAY_FUNCTIONS = `
-- The first id of a prefix at a time: prefix || 10 base32 characters of its epoch milliseconds.
CREATE OR REPLACE FUNCTION event_log_id_bound(prefix text, at timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT prefix || string_agg(
           substr('0123456789abcdefghjkmnpqrstvwxyz',
                  (((extract(epoch FROM at) * 1000)::bigint >> (5 * (9 - d))) & 31)::int + 1, 1), '' ORDER BY d)
    FROM generate_series(0, 9) AS d
$$;

-- Creates the partitions of one UTC day in the three tables, unless they exist.
CREATE OR REPLACE FUNCTION event_log_ensure_day(day date) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  suffix text := to_char(day, 'YYYYMMDD');
  lo timestamptz := day::timestamp AT TIME ZONE 'UTC';
  hi timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
  t text;
  p text;
BEGIN
  EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF events FOR VALUES FROM (%L) TO (%L)',
                 'events_d' || suffix, lo, hi);
  FOREACH t IN ARRAY ARRAY['event_deliveries', 'webhook_queue'] LOOP
    FOREACH p IN ARRAY ARRAY['live', 'test'] LOOP
      EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L) %s',
                     t || '_d' || suffix || '_' || p, t,
                     event_log_id_bound(CASE p WHEN 'live' THEN 'evt_' ELSE 'evt_test_' END, lo),
                     event_log_id_bound(CASE p WHEN 'live' THEN 'evt_' ELSE 'evt_test_' END, hi),
                     CASE t WHEN 'webhook_queue' THEN '${QUEUE_STORAGE}' ELSE '' END);
    END LOOP;
  END LOOP;
END
$$;
`;

/** Where the cut-over day starts: as a time, and as the first live and test event ids of that time. */
interface Cutover {
  at: string;
  live: string;
  test: string;
}

/**
 * The tables, each with its partition key and the CHECK that keeps the old rows before the
 * cut-over (literals: the partition proof reads constants, not function calls).
 */
const TABLES = [
  { name: 'events', key: 'created_at', before: (b: Cutover) => `created_at < '${b.at}'::timestamptz` },
  ...['event_deliveries', 'webhook_queue'].map((name) => ({
    name,
    key: 'event_id',
    before: (b: Cutover) => `event_id < '${b.live}' OR (event_id >= 'evt_test_' AND event_id < '${b.test}')`,
  })),
];

/** Drops the event foreign keys and primary key and swaps the tables (validating CHECKs on the way). */
export const phase = 'contract';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(DAY_FUNCTIONS);
  const { rows } = await knex.raw(
    `SELECT b AS at, event_log_id_bound('evt_', b) AS live, event_log_id_bound('evt_test_', b) AS test
       FROM (SELECT (date_trunc('day', now() AT TIME ZONE 'UTC') + interval '2 days') AT TIME ZONE 'UTC' AS b) AS x`,
  );
  const cutover: Cutover = { ...rows[0], at: rows[0].at.toISOString() };

  // Before the swap, while writes go on: the CHECKs are validated (SHARE UPDATE EXCLUSIVE: writes
  // continue) and events' new key is built concurrently; a run that failed here can run again.
  for (const t of TABLES) {
    await knex.raw(`ALTER TABLE ${t.name} DROP CONSTRAINT IF EXISTS ${t.name}_legacy_before`);
    await knex.raw(
      `ALTER TABLE ${t.name} ADD CONSTRAINT ${t.name}_legacy_before CHECK (${t.before(cutover)}) NOT VALID`,
    );
    await knex.raw(`ALTER TABLE ${t.name} VALIDATE CONSTRAINT ${t.name}_legacy_before`);
  }
  await knex.raw('DROP INDEX CONCURRENTLY IF EXISTS events_legacy_key');
  await knex.raw('CREATE UNIQUE INDEX CONCURRENTLY events_legacy_key ON events (id, created_at)');

  await knex.transaction(async (trx) => {
    // Waits at most 5 s for the locks (a long reader holds them): the migration fails and can run again.
    await trx.raw(`SET LOCAL lock_timeout = '5s'`);
    await trx.raw('LOCK TABLE events, event_deliveries, webhook_queue IN ACCESS EXCLUSIVE MODE');
    await trx.raw('ALTER TABLE event_deliveries DROP CONSTRAINT IF EXISTS event_deliveries_event_id_foreign');
    await trx.raw('ALTER TABLE webhook_queue DROP CONSTRAINT IF EXISTS webhook_queue_event_id_foreign');
    await trx.raw('ALTER TABLE events DROP CONSTRAINT events_pkey');
    await trx.raw('ALTER TABLE events ADD CONSTRAINT events_legacy_pkey PRIMARY KEY USING INDEX events_legacy_key');

    // An empty log keeps nothing; otherwise all three keep their old tables (a new delivery of an
    // old event goes to the old deliveries table, whether or not it had rows).
    const { rows: any } = await trx.raw(`SELECT EXISTS (SELECT 1 FROM events) AS any`);
    const empty = !any[0].any;
    for (const t of TABLES) {
      const legacy = `${t.name}_legacy`;
      const indexes: Array<{ name: string; def: string; primary: boolean }> = (
        await trx.raw(
          `SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS def, i.indisprimary AS primary
             FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
            WHERE i.indrelid = ?::regclass ORDER BY c.relname`,
          [t.name],
        )
      ).rows;
      await trx.raw(`ALTER TABLE ${t.name} RENAME TO ${legacy}`);
      await trx.raw(
        `CREATE TABLE ${t.name} (LIKE ${legacy} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE
           INCLUDING COMMENTS INCLUDING GENERATED INCLUDING STATISTICS) PARTITION BY RANGE (${t.key})`,
      );
      await trx.raw(`ALTER TABLE ${t.name} DROP CONSTRAINT ${t.name}_legacy_before`);
      // Not events' plain created_at index: only the legacy table's batched purge needs it.
      for (const index of indexes.filter((i) => i.name !== 'events_created_at_index')) {
        const columns = index.def.slice(index.def.indexOf(' USING '));
        if (index.primary)
          await trx.raw(`ALTER TABLE ${t.name} ADD PRIMARY KEY ${columns.replace(/^ USING btree /, '')}`);
        else {
          const unique = index.def.startsWith('CREATE UNIQUE') ? 'UNIQUE ' : '';
          await trx.raw(`CREATE ${unique}INDEX ${index.name}_p ON ${t.name}${columns}`);
        }
      }
      if (empty) await trx.raw(`DROP TABLE ${legacy}`);
      else await trx.raw(`ALTER TABLE ${t.name} ATTACH PARTITION ${legacy} DEFAULT`);
    }
    // What the API still shows: events from this time on (the janitor moves it as time passes,
    // hourly, while it drops storage a whole day at a time).
    await trx.raw(
      `CREATE TABLE event_log_retention (
         single boolean PRIMARY KEY DEFAULT true CHECK (single),
         cutoff timestamptz NOT NULL DEFAULT '-infinity'
       )`,
    );
    await trx.raw('INSERT INTO event_log_retention DEFAULT VALUES');
    // An event whose created_at has no day yet (a clock far ahead) is kept rather than refused.
    if (empty) await trx.raw('CREATE TABLE events_default PARTITION OF events DEFAULT');
    // From the cut-over on with old rows kept (the CHECKs prove none belongs there); from 31 days
    // back on an empty log. A week ahead either way: the janitor keeps it a week ahead.
    await trx.raw(
      `SELECT event_log_ensure_day(d::date)
         FROM generate_series(?::timestamptz AT TIME ZONE 'UTC', now() AT TIME ZONE 'UTC' + interval '7 days', interval '1 day') AS d`,
      [empty ? new Date(Date.now() - 31 * 86_400_000).toISOString() : cutover.at],
    );
  });
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
