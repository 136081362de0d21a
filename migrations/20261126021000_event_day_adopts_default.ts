import type { Knex } from 'knex';

/**
 * A day made for the event log takes over the events already written for it. An event whose
 * created_at is past the days made (a clock ahead: in tests, an app clock that follows a
 * time-skipping server by days) lands in `events_default`; making its day then failed (the
 * default partition may not hold rows of a new partition's range), the janitor left that day
 * without partitions for good, and every later event of the day went to the default partition too.
 * Now the day's rows leave the default partition and go into the new day in the same transaction.
 * Adds event_log_id_time, the inverse of event_log_id_bound, for by-id reads bounded to their
 * days. Functions only: no table is touched.
 */
/** Replaces function bodies; each keeps its signature and contract. */
export const phase = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
-- The time an event id was made: its 10 base32 characters of epoch milliseconds, before the
-- last 18 (prefix || time || randomness, src/lib/ids.ts).
CREATE OR REPLACE FUNCTION event_log_id_time(id text) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT to_timestamp(sum(((strpos('0123456789abcdefghjkmnpqrstvwxyz', substr(right(id, 28), d + 1, 1)) - 1)::bigint)
                          << (5 * (9 - d))) / 1000.0)
    FROM generate_series(0, 9) AS d
$$;
`);
  await knex.raw(`
CREATE OR REPLACE FUNCTION event_log_ensure_day(day date) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  suffix text := to_char(day, 'YYYYMMDD');
  lo timestamptz := day::timestamp AT TIME ZONE 'UTC';
  hi timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
  waiting events[];
  t text;
  p text;
BEGIN
  IF to_regclass(quote_ident('events_d' || suffix)) IS NULL THEN
    -- Normally none (the default partition is empty): the rows of the day wait here while it is made.
    IF to_regclass('events_default') IS NOT NULL THEN
      WITH gone AS (DELETE FROM events_default WHERE created_at >= lo AND created_at < hi RETURNING *)
      SELECT array_agg(gone) INTO waiting FROM gone;
    END IF;
    EXECUTE format('CREATE TABLE %I PARTITION OF events FOR VALUES FROM (%L) TO (%L)', 'events_d' || suffix, lo, hi);
    IF waiting IS NOT NULL THEN
      INSERT INTO events SELECT * FROM unnest(waiting);
    END IF;
  END IF;
  FOREACH t IN ARRAY ARRAY['event_deliveries', 'webhook_queue'] LOOP
    FOREACH p IN ARRAY ARRAY['live', 'test'] LOOP
      EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L) %s',
                     t || '_d' || suffix || '_' || p, t,
                     event_log_id_bound(CASE p WHEN 'live' THEN 'evt_' ELSE 'evt_test_' END, lo),
                     event_log_id_bound(CASE p WHEN 'live' THEN 'evt_' ELSE 'evt_test_' END, hi),
                     CASE t WHEN 'webhook_queue'
                       THEN 'WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 10000)'
                       ELSE '' END);
    END LOOP;
  END LOOP;
END
$$;`);
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
