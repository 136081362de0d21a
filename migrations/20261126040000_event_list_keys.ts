import type { Knex } from 'knex';

/**
 * Narrower keys for the event lists. `events_by_tenant` (event_list_key(merchant_id, mode),
 * created_at) and `events_by_tenant_type` (event_list_key(merchant_id, mode, type), created_at)
 * replace (merchant_id, mode, created_at, id) and (merchant_id, mode, type, created_at, id), whose
 * entries were 100 and 132 bytes (a 33-byte merchant id, a 38-byte event id, the type in full) for
 * 28 now: the tenant (and type) as a 64-bit hash, then the time. A list still compares
 * merchant_id, mode and type themselves, so a hash shared by two tenants would only cost a
 * filter, never a wrong row. The event id only broke ties between events of the same millisecond:
 * the planner reads the index in created_at order and sorts each run of equal created_at by id
 * (Incremental Sort, a run of one or two rows): the same pages in the same order, still pruned to
 * their days by created_at. `npm run bench:scale` (SCALE=0.02, 100 k events): 237 + 193 bytes per
 * event for the old pair, 47 + 45 for the new one, the lists as fast.
 *
 * On a loaded database, without blocking writes: each parent index is made ON ONLY `events`
 * (invalid, catalog only), so a day made meanwhile gets its own copy; then each partition's copy is
 * built CONCURRENTLY and attached (a catalog update; at most 5 s waiting for its lock), after which
 * the parent index is valid. `ANALYZE events` (a sample of each partition, blocking no writer) then
 * gives the planner statistics on the keys: without them it took a list for a scan and a sort.
 * Only then go the old indexes: dropping a partitioned index cannot be CONCURRENTLY, but it
 * rewrites nothing (an ACCESS EXCLUSIVE lock for milliseconds, waiting at most 5 s for a long
 * reader before the migration fails, to run again: every step is idempotent). `npm run
 * bench:migrate` (SCALE=0.05, 250 k events): 3.4 s, a writer every 20 ms waited at most 48 ms, no error.
 */
export const config = { transaction: false };

const INDEXES = [
  { name: 'events_by_tenant', columns: '(event_list_key(merchant_id, mode), created_at)' },
  { name: 'events_by_tenant_type', columns: '(event_list_key(merchant_id, mode, type), created_at)' },
];

/** The indexes replaced, by the names 20261125200000_partitioned_event_log gave them. */
const REPLACED = [
  'events_merchant_id_mode_created_at_id_index_p',
  'events_merchant_id_mode_type_created_at_id_index_p',
];

/** Drops the list indexes the previous release's queries use. */
export const phase = 'contract';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
-- The list indexes' key of a tenant's (merchant, mode) events, or of one type of them: a 64-bit
-- hash of the parts (hashtextextended: the hash partitioning's, the same in every release).
CREATE OR REPLACE FUNCTION event_list_key(VARIADIC parts text[]) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT hashtextextended(array_to_string(parts, '/'), 0)
$$`);
  for (const index of INDEXES) {
    await knex.raw(`CREATE INDEX IF NOT EXISTS ${index.name} ON ONLY events ${index.columns}`);
    // Every leaf without its copy attached yet (the days, the default or legacy partition).
    const { rows } = await knex.raw(
      `SELECT p.relid::regclass::text AS partition
         FROM pg_partition_tree('events') p
        WHERE p.isleaf AND NOT EXISTS (
                SELECT 1 FROM pg_inherits i JOIN pg_index x ON x.indexrelid = i.inhrelid
                 WHERE i.inhparent = ?::regclass AND x.indrelid = p.relid)`,
      [index.name],
    );
    for (const { partition } of rows as Array<{ partition: string }>) {
      const copy = `${partition}_${index.name.slice('events_'.length)}`;
      // A copy left invalid by a build that failed is built again.
      const { rows: invalid } = await knex.raw(
        `SELECT 1 FROM pg_index WHERE indexrelid = to_regclass(?) AND NOT indisvalid`,
        [copy],
      );
      if (invalid.length > 0) await knex.raw(`DROP INDEX CONCURRENTLY ${copy}`);
      await knex.raw(`CREATE INDEX CONCURRENTLY IF NOT EXISTS ${copy} ON ${partition} ${index.columns}`);
      await knex.transaction(async (trx) => {
        await trx.raw(`SET LOCAL lock_timeout = '5s'`);
        await trx.raw(`ALTER INDEX ${index.name} ATTACH PARTITION ${copy}`);
      });
    }
  }
  await knex.raw('ANALYZE events');
  await knex.transaction(async (trx) => {
    await trx.raw(`SET LOCAL lock_timeout = '5s'`);
    for (const name of REPLACED) await trx.raw(`DROP INDEX IF EXISTS ${name}`);
  });
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
