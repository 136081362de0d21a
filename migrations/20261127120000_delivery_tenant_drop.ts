import type { Knex } from 'knex';

/**
 * Drops `event_deliveries.merchant_id` and `mode` (and the CHECK on mode), optional and no longer
 * written since 20261126041000_delivery_tenant_optional. No code of release 0.1.0 names them: it
 * only gets them unused from `SELECT d.*` and from its prepared insert's `RETURNING *`, and that
 * prepared statement fails once they are gone ("cached plan must not change result type"), so the
 * drop waits for 0.1.0 to be gone; this release's insert names its columns. A catalog change on the
 * partitioned table and every partition (no row is read or rewritten; the bytes come back as the
 * days are dropped): an ACCESS EXCLUSIVE lock on each of the 76 for milliseconds, taken within the
 * runner's 1 s lock timeout, or the migration is tried again. `npm run bench:migrate` (a writer
 * every 20 ms): SCALE=0.05, 0.1 s, 1 try, writer worst 24 ms (45 ms before); SCALE=0.2, 0.1 s,
 * writer worst 69 ms (37 ms before); behind a 5 s reader (LONG_READ_S=5), 5.2 s, 3 tries, writer
 * worst 1,018 ms (the lock timeout: writes queue behind a waiting try); never an error.
 */

/** A drop, which the previous release's prepared insert cannot outlive. */
export const phase = 'contract';

export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE event_deliveries DROP COLUMN IF EXISTS merchant_id, DROP COLUMN IF EXISTS mode');
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
