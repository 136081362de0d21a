import type { Knex } from 'knex';

/**
 * `webhook_endpoint_watches`: one row per endpoint whose delivery activity watches its queue (it
 * LISTENs for the dispatcher's announcement and claims new rows the moment they commit) until
 * `watching_until`. The dispatcher reads it, FOR SHARE, in the transaction that queues rows, and
 * sends no wake signal to an endpoint still watched; the activity ends its watch with an UPDATE
 * (which waits for such a transaction to commit) before it reads the queue one last time, so a row
 * is always either heard, seen by that read, or woken for (src/webhooks/watches.ts). A table of its
 * own, not a column of `webhook_endpoints`: the dispatcher's lock then never meets the recorder's
 * lock on the endpoint row. A new table only: the previous release neither reads nor writes it
 * (its dispatcher wakes every endpoint, as before). The runner's lock timeout applies (no lock on
 * an existing table is taken).
 */
export const phase = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    `CREATE TABLE webhook_endpoint_watches (
       endpoint_id text PRIMARY KEY,
       watching_until timestamptz NOT NULL
     )`,
  );
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
