import type { Knex } from 'knex';

/**
 * Console passkeys (docs/console.md): `console_passkeys`, a user's WebAuthn credentials (the
 * credential id, its COSE public key, the signature counter last seen, the transports the browser
 * named), and `console_webauthn_challenges`, the challenges the console handed out, bound to the
 * console session that asked, stored as SHA-256 hashes, single-use (a verification deletes its
 * row) and short-lived. New tables only: the previous release neither reads nor writes them (its
 * sign-in offers TOTP and recovery codes, which keep working). The runner's lock timeout applies
 * (the foreign keys take a short lock on `console_users` and `console_sessions`).
 */
export const phase = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('console_passkeys', (t) => {
    t.text('id').primary();
    t.text('user_id').notNullable().references('console_users.id');
    /** The credential id (base64url), as the authenticator made it. */
    t.text('credential_id').notNullable().unique();
    /** The COSE public key. */
    t.binary('public_key').notNullable();
    /** The signature counter last seen (0 for authenticators that do not count). */
    t.bigInteger('counter').notNullable().defaultTo(0);
    t.specificType('transports', 'text[]').notNullable().defaultTo('{}');
    /** The user's name for it ("Laptop", "Phone"). */
    t.text('name').notNullable();
    t.boolean('backed_up').notNullable().defaultTo(false);
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable();
    t.timestamp('last_used_at', { useTz: true, precision: 3 });
  });
  await knex.raw('CREATE INDEX console_passkeys_user ON console_passkeys (user_id)');

  await knex.schema.createTable('console_webauthn_challenges', (t) => {
    t.bigIncrements('id').primary();
    t.text('session_id').notNullable().references('console_sessions.id');
    t.text('purpose').notNullable().checkIn(['register', 'authenticate']);
    /** SHA-256 of the challenge; the challenge itself is never stored. */
    t.text('challenge_hash').notNullable();
    t.timestamp('expires_at', { useTz: true, precision: 3 }).notNullable();
  });
  await knex.raw(
    'CREATE INDEX console_webauthn_challenges_session ON console_webauthn_challenges (session_id, purpose)',
  );
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
