import type { Knex } from 'knex';

/**
 * The 24-hour failing e-mail: `webhook_endpoints.last_error` (the error token of the latest failed
 * attempt, written by the statement that already moves the failure clock) and
 * `failing_notified_at` (when the e-mail went; one sent before `failing_since` belongs to an
 * earlier failure streak). Nullable columns without a default: no rewrite, an instant's lock.
 */
/** Nullable columns only. */
export const phase = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    'ALTER TABLE webhook_endpoints ADD COLUMN last_error text, ADD COLUMN failing_notified_at timestamptz(3)',
  );
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
