import type { Knex } from 'knex';

/**
 * The seller and merchant console's accounts (docs/console.md): its users (each of one seller or
 * one merchant, with a role), their sessions and invites (only SHA-256 hashes of the tokens are
 * stored), their recovery codes (hashed), and the append-only audit log. New tables only: the
 * previous release never reads them.
 */
export const phase = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('console_users', (t) => {
    t.text('id').primary();
    t.text('seller_id').references('sellers.id');
    t.text('merchant_id').references('merchants.id');
    t.text('email').notNullable();
    t.text('role').notNullable().checkIn(['owner', 'developer', 'operator', 'viewer']);
    /** Argon2id, PHC string. */
    t.text('password_hash').notNullable();
    /** The TOTP secret, encrypted with the service's secret key (AES-256-GCM, bound to the user id). */
    t.text('totp_ciphertext').notNullable();
    /** The last TOTP time step accepted: a code works once. */
    t.bigInteger('totp_last_step');
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('disabled_at', { useTz: true, precision: 3 });
    t.check('(seller_id IS NULL) <> (merchant_id IS NULL)', [], 'console_users_one_tenant');
  });
  await knex.raw('CREATE UNIQUE INDEX console_users_email ON console_users (lower(email))');
  await knex.raw('CREATE INDEX console_users_seller ON console_users (seller_id) WHERE seller_id IS NOT NULL');
  await knex.raw('CREATE INDEX console_users_merchant ON console_users (merchant_id) WHERE merchant_id IS NOT NULL');

  await knex.schema.createTable('console_sessions', (t) => {
    t.text('id').primary();
    /** SHA-256 of the cookie's token; the token itself is never stored. */
    t.text('token_hash').notNullable().unique();
    t.text('user_id').notNullable().references('console_users.id');
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable();
    t.timestamp('last_seen_at', { useTz: true, precision: 3 }).notNullable();
    /** Null while only the password was given (the sign-in's second step is pending). */
    t.timestamp('second_factor_at', { useTz: true, precision: 3 });
    /** When password and second factor were last both given (sign-in or re-authentication). */
    t.timestamp('reauthenticated_at', { useTz: true, precision: 3 });
    t.timestamp('revoked_at', { useTz: true, precision: 3 });
    t.text('ip');
    t.text('user_agent');
  });
  await knex.raw('CREATE INDEX console_sessions_user ON console_sessions (user_id, created_at DESC)');

  await knex.schema.createTable('console_invites', (t) => {
    t.text('id').primary();
    t.text('token_hash').notNullable().unique();
    t.text('seller_id').references('sellers.id');
    t.text('merchant_id').references('merchants.id');
    t.text('email').notNullable();
    t.text('role').notNullable().checkIn(['owner', 'developer', 'operator', 'viewer']);
    /** The TOTP secret offered on the invite page (encrypted), kept so a reload shows the same one. */
    t.text('totp_ciphertext');
    /** Who invited: a console user id, or null for the operator CLI. */
    t.text('invited_by');
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('expires_at', { useTz: true, precision: 3 }).notNullable();
    t.timestamp('used_at', { useTz: true, precision: 3 });
    t.check('(seller_id IS NULL) <> (merchant_id IS NULL)', [], 'console_invites_one_tenant');
  });

  await knex.schema.createTable('console_recovery_codes', (t) => {
    t.text('user_id').notNullable().references('console_users.id');
    t.text('code_hash').notNullable();
    t.timestamp('used_at', { useTz: true, precision: 3 });
    t.primary(['user_id', 'code_hash']);
  });

  await knex.schema.createTable('console_audit_log', (t) => {
    t.bigIncrements('id').primary();
    t.timestamp('at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now());
    /** The console user, or null (a failed sign-in for an unknown e-mail, the operator CLI). */
    t.text('user_id');
    /** The e-mail as typed on a sign-in, or the user's. */
    t.text('actor_email');
    t.text('seller_id');
    t.text('merchant_id');
    t.text('action').notNullable();
    t.text('target');
    t.text('outcome').notNullable();
    t.text('ip');
    t.text('user_agent');
    t.text('request_id');
    /** Non-secret details (a key's scopes, an order's carrier). */
    t.jsonb('detail');
  });
  await knex.raw(
    'CREATE INDEX console_audit_seller ON console_audit_log (seller_id, id DESC) WHERE seller_id IS NOT NULL',
  );
  await knex.raw(
    'CREATE INDEX console_audit_merchant ON console_audit_log (merchant_id, id DESC) WHERE merchant_id IS NOT NULL',
  );
  // Append-only: no UPDATE or DELETE, whoever asks (a trigger, so even the service's own role cannot).
  await knex.raw(`
    CREATE FUNCTION console_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'console_audit_log is append-only';
    END $$`);
  await knex.raw(`
    CREATE TRIGGER console_audit_append_only BEFORE UPDATE OR DELETE ON console_audit_log
      FOR EACH ROW EXECUTE FUNCTION console_audit_append_only()`);
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
