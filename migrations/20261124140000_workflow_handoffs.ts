import type { Knex } from 'knex';

/**
 * Durable handoffs from Postgres to Temporal. A state change that a workflow must hear of (a new
 * session's timer, an attempt for the session workflow, a session settled elsewhere, a refund to
 * settle) writes a row here in its own transaction. The API delivers it right after the commit and
 * deletes it; a row still here when `next_attempt_at` passes (the API died, Temporal refused) is
 * delivered by the worker's relay, which leases it by moving `next_attempt_at` forward and deletes
 * it once delivered. `payload` is the handoff as the code reads it (with its `kind`).
 */
/** A new table only. */
export const phase = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('workflow_handoffs', (t) => {
    t.bigIncrements('id');
    t.text('merchant_id').notNullable().references('merchants.id');
    t.text('mode').notNullable().checkIn(['test', 'live']);
    t.text('workflow_id').notNullable();
    t.text('kind').notNullable();
    t.jsonb('payload').notNullable();
    t.integer('attempts').notNullable().defaultTo(0);
    t.text('last_error');
    t.timestamp('next_attempt_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now());
  });
  // The relay's claim: due rows first.
  await knex.raw('CREATE INDEX workflow_handoffs_due ON workflow_handoffs (next_attempt_at)');
  // Per workflow in commit order: a row waits while an earlier one for its workflow is undelivered.
  await knex.raw('CREATE INDEX workflow_handoffs_workflow ON workflow_handoffs (workflow_id, id)');
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
