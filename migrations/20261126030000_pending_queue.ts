import type { Knex } from 'knex';

/**
 * The webhook queue holds pending deliveries only: one plain table, a row deleted in the
 * transaction that records its last attempt (delivered, failed after the last retry, cancelled).
 * Day-partitioned (20261125200000), it kept every finished row for 30 days (about 320 B an event)
 * and spread the pending ones over 76 partitions of 4 indexes each, so Postgres planned every
 * claim over all of them: 45 to 65 ms of planning for 4 to 10 ms of execution (bench:webhooks,
 * 2026-11-26), 3.5 ms of Postgres CPU a delivery against 0.45 ms before. What is left is as large
 * as the backlog, not as the month; attempts stay recorded in `event_deliveries`, which is what
 * every reader (the API, the undelivered list, the e-mails) reads.
 *
 * No `status` column (every row is pending) and no `updated_at` (nothing read it). Rows of events
 * past retention are deleted by the janitor in bounded batches by id range (ids are time-ordered),
 * through the primary key; normally none are left by then (the retries end after three days).
 *
 * On a loaded database: the new table is made beside the old one, then one short transaction
 * locks the old queue (writers wait at most the lock timeout, 5 s, or the migration fails and can
 * run again), copies its pending rows (the backlog: normally hundreds, 200,000 in about a second),
 * and drops the old table with all of its days. `event_log_ensure_day` stops making queue days.
 */
export const config = { transaction: false };

/** Drops the old webhook_queue, which the previous release reads and writes. */
export const phase = 'contract';

export async function up(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE IF EXISTS webhook_queue_pending');
  await knex.raw(`
    CREATE TABLE webhook_queue_pending (
      event_id text NOT NULL,
      endpoint_id text NOT NULL,
      generation bigint NOT NULL,
      -- The next attempt to make.
      attempt_no integer NOT NULL DEFAULT 1,
      -- When the next attempt is due (workflow time); while claimed, when the claim lapses.
      next_attempt_at timestamptz(3) NOT NULL DEFAULT now(),
      -- The delivery batch holding the row (its POST may be in flight); null otherwise.
      claim text,
      created_at timestamptz(3) NOT NULL DEFAULT now(),
      CONSTRAINT webhook_queue_pending_pkey PRIMARY KEY (event_id, endpoint_id, generation)
    )
    -- Every row is inserted, updated once or twice (claimed, then retried) and deleted, moving
    -- indexed columns each time (no update is HOT): the table is as large as the backlog and
    -- turns over entirely, so it is vacuumed after 1,000 dead rows rather than after 20 % of
    -- itself, and its dead index entries (which a claim walks past at the low end of the due
    -- index) go within seconds under load.
    WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000,
          autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 1000,
          autovacuum_vacuum_cost_delay = 0)`);
  await knex.transaction(async (trx) => {
    await trx.raw(`SET LOCAL lock_timeout = '5s'`);
    await trx.raw('LOCK TABLE webhook_queue IN ACCESS EXCLUSIVE MODE');
    await trx.raw(
      `INSERT INTO webhook_queue_pending (event_id, endpoint_id, generation, attempt_no, next_attempt_at, claim, created_at)
       SELECT event_id, endpoint_id, generation, attempt_no, coalesce(next_attempt_at, now()), claim, created_at
         FROM webhook_queue WHERE status = 'pending'`,
    );
    await trx.raw('DROP TABLE webhook_queue');
    await trx.raw('ALTER TABLE webhook_queue_pending RENAME TO webhook_queue');
    await trx.raw('ALTER INDEX webhook_queue_pending_pkey RENAME TO webhook_queue_pkey');
    // The claim: an endpoint's rows in due order.
    await trx.raw('CREATE INDEX webhook_queue_due ON webhook_queue (endpoint_id, next_attempt_at)');
    // A retried delivery batch takes back the rows it holds.
    await trx.raw('CREATE INDEX webhook_queue_claim ON webhook_queue (claim) WHERE claim IS NOT NULL');
    // The backlog gauge's oldest due delivery, and the overdue sweep (src/telemetry/backlogs.ts).
    await trx.raw('CREATE INDEX webhook_queue_pending_due ON webhook_queue (next_attempt_at)');
    await trx.raw(`
CREATE OR REPLACE FUNCTION event_log_ensure_day(day date) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  suffix text := to_char(day, 'YYYYMMDD');
  lo timestamptz := day::timestamp AT TIME ZONE 'UTC';
  hi timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
  waiting events[];
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
  FOREACH p IN ARRAY ARRAY['live', 'test'] LOOP
    EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF event_deliveries FOR VALUES FROM (%L) TO (%L)',
                   'event_deliveries_d' || suffix || '_' || p,
                   event_log_id_bound(CASE p WHEN 'live' THEN 'evt_' ELSE 'evt_test_' END, lo),
                   event_log_id_bound(CASE p WHEN 'live' THEN 'evt_' ELSE 'evt_test_' END, hi));
  END LOOP;
END
$$;`);
  });
  await knex.raw('ANALYZE webhook_queue');
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
