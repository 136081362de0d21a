import type { Db } from '../db/knex';
import { newId } from '../lib/ids';
import type { ConsoleUser } from './accounts';
import { newToken, tokenHash } from './tokens';

/** A session ends after this long without a request… */
export const IDLE_TIMEOUT_MS = 30 * 60_000;
/** …and this long after sign-in, whatever. */
export const ABSOLUTE_TIMEOUT_MS = 12 * 60 * 60_000;
/** Creating or revealing a key, or changing a role, needs password and code within this long. */
export const REAUTH_WINDOW_MS = 5 * 60_000;
/** The second step of a sign-in (the code) must follow the password within this long. */
export const SECOND_FACTOR_WINDOW_MS = 10 * 60_000;
/** `last_seen_at` is written at most this often (a page view is not a write each time). */
const TOUCH_EVERY_MS = 60_000;

export interface ConsoleSession {
  id: string;
  user: ConsoleUser;
  createdAt: Date;
  /** False while only the password was given: the session opens only the second step's page. */
  complete: boolean;
  reauthenticatedAt: Date | null;
  /** The cookie's token (kept in memory for this request only: the CSRF token derives from it). */
  token: string;
}

/**
 * A new session for `user`: `complete` when password and second factor were given (an accepted
 * invite), else waiting for the second factor (`completeSession`). Returns the cookie's token.
 */
export async function startSession(
  db: Db,
  user: ConsoleUser,
  meta: { now: Date; ip: string; userAgent: string; complete: boolean },
): Promise<{ id: string; token: string }> {
  const token = newToken();
  const id = newId('csess');
  await db('console_sessions').insert({
    id,
    token_hash: tokenHash(token),
    user_id: user.id,
    created_at: meta.now,
    last_seen_at: meta.now,
    second_factor_at: meta.complete ? meta.now : null,
    reauthenticated_at: meta.complete ? meta.now : null,
    ip: meta.ip,
    user_agent: meta.userAgent.slice(0, 400),
  });
  return { id, token };
}

/**
 * The live session of `token`: not revoked, seen within IDLE_TIMEOUT_MS, younger than
 * ABSOLUTE_TIMEOUT_MS, its user not disabled. Marks it seen.
 */
export async function sessionOf(db: Db, token: string, now: Date): Promise<ConsoleSession | null> {
  const row = await db('console_sessions as s')
    .join('console_users as u', 'u.id', 's.user_id')
    .where('s.token_hash', tokenHash(token))
    .whereNull('s.revoked_at')
    .whereNull('u.disabled_at')
    .first(
      's.id',
      's.created_at',
      's.last_seen_at',
      's.reauthenticated_at',
      's.second_factor_at',
      'u.id as user_id',
      'u.email',
      'u.role',
      'u.seller_id',
      'u.merchant_id',
    );
  if (!row) return null;
  const t = now.getTime();
  const complete = row.second_factor_at !== null;
  if (!complete && t - new Date(row.created_at).getTime() > SECOND_FACTOR_WINDOW_MS) return null;
  if (t - new Date(row.last_seen_at).getTime() > IDLE_TIMEOUT_MS) return null;
  if (t - new Date(row.created_at).getTime() > ABSOLUTE_TIMEOUT_MS) return null;
  if (t - new Date(row.last_seen_at).getTime() > TOUCH_EVERY_MS) {
    await db('console_sessions').where({ id: row.id }).update({ last_seen_at: now });
  }
  return {
    id: row.id,
    token,
    createdAt: new Date(row.created_at),
    complete,
    reauthenticatedAt: row.reauthenticated_at ? new Date(row.reauthenticated_at) : null,
    user: { id: row.user_id, email: row.email, role: row.role, seller_id: row.seller_id, merchant_id: row.merchant_id },
  };
}

export const recentlyReauthenticated = (session: ConsoleSession, now: Date): boolean =>
  session.reauthenticatedAt !== null && now.getTime() - session.reauthenticatedAt.getTime() <= REAUTH_WINDOW_MS;

/**
 * The second factor was given: the session opens, under a new token (the password step's token
 * is never the signed-in one, so a cookie planted before sign-in is worth nothing after it).
 */
export async function completeSession(db: Db, sessionId: string, now: Date): Promise<string> {
  const token = newToken();
  await db('console_sessions')
    .where({ id: sessionId })
    .update({ token_hash: tokenHash(token), second_factor_at: now, reauthenticated_at: now, last_seen_at: now });
  return token;
}

export async function markReauthenticated(db: Db, sessionId: string, now: Date): Promise<void> {
  await db('console_sessions').where({ id: sessionId }).update({ reauthenticated_at: now, last_seen_at: now });
}

/** Ends one of the user's sessions (their own only); false when there was none live. */
export async function revokeSession(db: Db, userId: string, sessionId: string, now: Date): Promise<boolean> {
  const rows = await db('console_sessions')
    .where({ id: sessionId, user_id: userId })
    .whereNull('revoked_at')
    .update({ revoked_at: now })
    .returning('id');
  return rows.length > 0;
}

/** The user's sessions that can still be used, newest first. */
export async function liveSessions(db: Db, userId: string, now: Date) {
  const rows = await db('console_sessions')
    .where({ user_id: userId })
    .whereNull('revoked_at')
    .whereNotNull('second_factor_at')
    .where('last_seen_at', '>', new Date(now.getTime() - IDLE_TIMEOUT_MS))
    .where('created_at', '>', new Date(now.getTime() - ABSOLUTE_TIMEOUT_MS))
    .orderBy('created_at', 'desc')
    .select('id', 'created_at', 'last_seen_at', 'ip', 'user_agent');
  return rows as Array<{
    id: string;
    created_at: Date;
    last_seen_at: Date;
    ip: string | null;
    user_agent: string | null;
  }>;
}
