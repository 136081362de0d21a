import type { Knex } from 'knex';
import { createIndexConcurrently } from '../src/db/concurrent-index';

/**
 * `event_deliveries_by_endpoint` (endpoint_id, created_at): an endpoint's deliveries newest first,
 * as the console's endpoint page reads them (a page, its cursor and its delivered / pending / failed
 * filters, src/console/delivery-list.ts). Without it the page read every day of the event log
 * whole: the table is partitioned by its event id's day and had no index leading with the endpoint.
 *
 * On a loaded database, without blocking writers: the parent index is made ON ONLY
 * `event_deliveries` (invalid, catalog only), so a day the janitor makes meanwhile (or any day made
 * later: `event_log_ensure_day`'s CREATE TABLE … PARTITION OF) gets its own copy with it; then each
 * existing partition's copy is built CONCURRENTLY (an INVALID leftover of a failed build dropped
 * first) and attached (a catalog update, under the runner's lock timeout), after which the parent
 * index is valid. Every step is idempotent: a run that timed out waiting for a lock runs again and
 * builds only what is missing. A new index only: the previous release neither needs nor minds it.
 */
export const config = { transaction: false };

export const phase = 'expand';
/** A day's copy is built over its rows while writes go on (millions a day at scale): longer than the runner's 60 s a statement. */
export const timeouts = { statementMs: 15 * 60_000 };

export const INDEX = 'event_deliveries_by_endpoint';
const COLUMNS = '(endpoint_id, created_at)';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE INDEX IF NOT EXISTS ${INDEX} ON ONLY event_deliveries ${COLUMNS}`);
  // Every leaf without its copy attached yet (the days, and a legacy default partition if any).
  const { rows } = await knex.raw(
    `SELECT p.relid::regclass::text AS partition
       FROM pg_partition_tree('event_deliveries') p
      WHERE p.isleaf AND NOT EXISTS (
              SELECT 1 FROM pg_inherits i JOIN pg_index x ON x.indexrelid = i.inhrelid
               WHERE i.inhparent = ?::regclass AND x.indrelid = p.relid)
      ORDER BY 1`,
    [INDEX],
  );
  for (const { partition } of rows as Array<{ partition: string }>) {
    const copy = `${partition}_by_endpoint`;
    await createIndexConcurrently(knex, copy, `${partition} ${COLUMNS}`);
    await knex.raw(`ALTER INDEX ${INDEX} ATTACH PARTITION ${copy}`);
  }
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
