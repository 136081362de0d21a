import type { Knex } from 'knex';

/**
 * The outbox becomes a transactional outbox that the worker's relay sends from (SMTP for e-mail,
 * an HTTP provider for SMS). A new row is due at once (`next_attempt_at` defaults to now); the
 * relay claims due rows, leases them by moving `next_attempt_at` forward, and records `sent_at`,
 * or `attempts` / `last_error` and the next try; a message it gives up on keeps `sent_at` and
 * `next_attempt_at` null. Rows written before this migration get no `next_attempt_at`: they were
 * only ever meant for `ops outbox list` and are never sent. Every insert notifies `svc_outbox` when
 * its transaction commits, so callers need no change.
 */
/** Adds columns, an index, a function and a trigger; drops nothing. */
export const phase = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('outbox', (t) => {
    t.timestamp('sent_at', { useTz: true, precision: 3 }).nullable();
    t.integer('attempts').notNullable().defaultTo(0);
    t.text('last_error').nullable();
    t.timestamp('next_attempt_at', { useTz: true, precision: 3 }).nullable();
  });
  // The default is set after the column exists, so existing rows keep null (never sent).
  await knex.raw('ALTER TABLE outbox ALTER COLUMN next_attempt_at SET DEFAULT now()');
  // The relay's claim: unsent, still scheduled rows of the kinds it has a transport for, due first.
  await knex.raw(
    'CREATE INDEX outbox_relay_due ON outbox (kind, next_attempt_at) WHERE sent_at IS NULL AND next_attempt_at IS NOT NULL',
  );
  await knex.raw(`
    CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('svc_outbox', '');
      RETURN NULL;
    END
    $$`);
  await knex.raw(
    'CREATE TRIGGER outbox_notify AFTER INSERT ON outbox FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify()',
  );
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
