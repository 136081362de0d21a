import type { Knex } from 'knex';

/**
 * Two console changes (docs/console.md), both only widening what the tables take:
 *
 * - `console_webauthn_challenges.purpose` may be `reauth` too: a passkey assertion re-authenticates
 *   a signed-in session, against a challenge of its own purpose. The CHECK is replaced by a wider
 *   one, NOT VALID (a catalog change under a short lock: no row is read); every row written from
 *   now on is checked, and every row already there has passed the narrower CHECK (and is gone
 *   within 5 minutes anyway).
 * - `console_invites.revoked_at`: an owner revokes a pending invite; its link stops working.
 *
 * The previous release (0.2.0) has no console: it neither reads nor writes these tables.
 */
export const phase = 'expand';

export async function up(knex: Knex): Promise<void> {
  // The dropped CHECK is replaced in the same statement by one that allows more: every guarantee
  // it gave (a purpose is one of a few known values) still holds, and no release but this one
  // writes the table.
  await knex.raw(
    `ALTER TABLE console_webauthn_challenges
       -- squawk-ignore ban-drop-constraint
       DROP CONSTRAINT IF EXISTS console_webauthn_challenges_purpose_check,
       ADD CONSTRAINT console_webauthn_challenges_purpose
         CHECK (purpose IN ('register', 'authenticate', 'reauth')) NOT VALID`,
  );
  await knex.raw('ALTER TABLE console_invites ADD COLUMN revoked_at timestamptz(3)');
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
