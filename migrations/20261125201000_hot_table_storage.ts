import type { Knex } from 'knex';

/**
 * Autovacuum and storage settings of the tables that churn, from the volumes `npm run bench:scale`
 * loads (SCALE=1: 2 M idempotency records a day, 1 M stock rows, 5 M queue rows a month). Each
 * `ALTER TABLE … SET` takes a SHARE UPDATE EXCLUSIVE lock (reads and writes go on) and rewrites
 * nothing: a fillfactor applies to pages written from now on. The webhook queue's days carry
 * theirs from the migration that made them (20261125200000_partitioned_event_log).
 */
const SETTINGS: Array<{ table: string; options: string }> = [
  // 2 M live rows, 83 k inserted and 83 k purged an hour: at the default 20 % a vacuum waits for
  // 400 k dead rows (five hours of purges), which the claim's key lookups and the purge's
  // created_at scan walk meanwhile; 1 % vacuums every quarter hour or so. The in_progress → done
  // update touches no indexed column: room on the page keeps it a HOT update.
  {
    table: 'idempotency_records',
    options: 'autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 10000, fillfactor = 90',
  },
  // A few thousand rows, each counter updated by every request of its window: half-empty pages keep
  // those updates HOT (no index entry each), and a vacuum by count, not by share, clears them.
  {
    table: 'rate_limit_windows',
    options: 'fillfactor = 50, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000',
  },
  // A queue: inserted and deleted within seconds, so nearly empty; the due index is walked on every
  // relay pass, so vacuum by count and without the cost-based sleeps.
  {
    table: 'workflow_handoffs',
    options: 'autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_cost_delay = 0',
  },
  // 1 M rows (one per variant and location), 500 of them rewritten by each inventory bulk call:
  // level and updated_at are not indexed, so room on the page makes those updates HOT.
  {
    table: 'stock_levels',
    options: 'fillfactor = 80, autovacuum_vacuum_scale_factor = 0.05',
  },
];

/** Storage settings only. */
export const phase = 'expand';

export async function up(knex: Knex): Promise<void> {
  for (const { table, options } of SETTINGS) await knex.raw(`ALTER TABLE ${table} SET (${options})`);
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
