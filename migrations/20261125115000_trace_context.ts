import type { Knex } from 'knex';

/**
 * `traceparent` (W3C Trace Context) on the rows that carry work past a commit: a workflow handoff,
 * an event (its webhook deliveries) and an outbox message. Whoever picks the row up later (the
 * handoff relay, a delivery attempt, the outbox relay) continues the trace of the request or
 * activity that wrote it. Null when tracing is off. Nullable without a default: no table rewrite.
 */
/** Nullable columns only. */
export const phase = 'expand';

export async function up(knex: Knex): Promise<void> {
  for (const table of ['workflow_handoffs', 'events', 'outbox'])
    await knex.raw(`ALTER TABLE ${table} ADD COLUMN traceparent text`);
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
