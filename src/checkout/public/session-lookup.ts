import type { Db } from '../../db/knex';
import { ApiError } from '../../http/errors';
import { SESSION_CODE } from '../schemas';
import type { MerchantScope } from '../sessions/deps';
import type { SessionRow } from '../sessions/session-row';

/** `404 session_not_found`. */
export const sessionNotFound = () => ApiError.notFound('session_not_found', 'No such checkout session.');

/**
 * The session with `code` of the publishable key's merchant and mode; another merchant's or
 * mode's, like a code that cannot be one, is `404 session_not_found`.
 */
export async function sessionByCode(db: Db, scope: MerchantScope, code: string): Promise<SessionRow> {
  if (!SESSION_CODE.test(code)) throw sessionNotFound();
  const session: SessionRow | undefined = await db('checkout_sessions')
    .where({ code, merchant_id: scope.merchantId, mode: scope.mode })
    .first();
  if (!session) throw sessionNotFound();
  return session;
}

/** True for an open session whose `expires_at` has passed before its timer fired. */
export const overdue = (session: SessionRow, now: Date): boolean =>
  session.status === 'open' && new Date(session.expires_at).getTime() <= now.getTime();

/** The page may show it: `410 session_expired` / `410 session_canceled` otherwise. */
export function assertShowable(session: SessionRow, now: Date): void {
  if (session.status === 'expired' || overdue(session, now)) {
    throw new ApiError(410, 'session_expired', 'This checkout session has expired.');
  }
  if (session.status === 'canceled') {
    throw new ApiError(410, 'session_canceled', 'This checkout session was canceled.');
  }
}

/** A shopper action needs an open session: `409 session_not_open` otherwise (an overdue one included). */
export function assertOpen(session: SessionRow, now: Date): void {
  if (session.status !== 'open' || overdue(session, now)) {
    const status = overdue(session, now) ? 'expired' : session.status;
    throw ApiError.conflict('session_not_open', `The session is ${status}, not open.`);
  }
}
