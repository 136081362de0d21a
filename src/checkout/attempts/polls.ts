import { ApiError } from '../../http/errors';
import { log } from '../../lib/log';
import { isObjectId } from '../ids';
import type { PublicDeps } from '../public/deps';
import type { MerchantDisplay } from '../public/public-session';
import { sessionNotFound } from '../public/session-lookup';
import { SESSION_CODE } from '../schemas';
import type { MerchantScope } from '../sessions/deps';
import { AttemptRow, attemptLookupOut, attemptPollOut, PollSession } from './attempt-row';
import { signalVerify } from '../../temporal/session';

export const attemptNotFound = () => ApiError.notFound('attempt_not_found', 'No such payment attempt.');

/** The merchant's attempt in the key's mode; another merchant's or mode's is `404 attempt_not_found`. */
export async function attemptInScope(deps: PublicDeps, scope: MerchantScope, attemptId: string): Promise<AttemptRow> {
  if (!isObjectId(attemptId)) throw attemptNotFound();
  const attempt: AttemptRow | undefined = await deps
    .db('payment_attempts')
    .where({ id: attemptId, merchant_id: scope.merchantId, mode: scope.mode })
    .first();
  if (!attempt) throw attemptNotFound();
  return attempt;
}

/**
 * The return page's verify: the first poll of a pending test attempt that no button decided asks
 * the session workflow to let the amount rule decide. One conditional write, so at most one signal.
 */
async function verifyOnReturn(deps: PublicDeps, attempt: AttemptRow): Promise<void> {
  if (attempt.status !== 'pending' || attempt.gateway !== 'test' || attempt.decision || attempt.verify_requested_at) {
    return;
  }
  const pending = () => deps.db('payment_attempts').where({ id: attempt.id, status: 'pending' }).whereNull('decision');
  const marked = await pending().whereNull('verify_requested_at').update({ verify_requested_at: deps.clock() });
  if (marked === 0) return;
  try {
    await signalVerify(deps.temporal, attempt.session_id, attempt.id);
  } catch (err) {
    // Unmarked, so the next poll asks again.
    await pending().update({ verify_requested_at: null });
    log.warn('could not signal verify', {
      attempt_id: attempt.id,
      error: err,
    });
  }
}

const POLL_SESSION_COLUMNS = [
  'id',
  'code',
  'mode',
  'status',
  'payment_status',
  'reference_id',
  'success_url',
  'cancel_url',
  'locale',
] as const;
/** The session's columns beside the attempt's, each renamed `s_<column>` (both tables have `id`, `status`, `mode`). */
const pollSessionSelect = POLL_SESSION_COLUMNS.map((c) => `s.${c} as s_${c}`);
const pollSessionOf = (row: Record<string, unknown>) =>
  Object.fromEntries(POLL_SESSION_COLUMNS.map((c) => [c, row[`s_${c}`]])) as PollSession;

/**
 * `GET /public/sessions/{code}/attempts/{attempt_id}`: the attempt poll. The session and the
 * attempt come from one statement, so one moment: a settle writes both in one transaction, and a
 * poll never pairs the settled attempt with the session as it was before (or the other way round).
 */
export async function pollAttempt(deps: PublicDeps, scope: MerchantScope, code: string, attemptId: string) {
  if (!SESSION_CODE.test(code)) throw sessionNotFound();
  // An id that cannot be one matches no attempt (and never reaches Postgres as a parameter).
  const id = isObjectId(attemptId) ? attemptId : null;
  const row: (AttemptRow & Record<string, unknown>) | undefined = await deps
    .db('checkout_sessions as s')
    .leftJoin('payment_attempts as a', (on) => on.on('a.session_id', 's.id').andOn('a.id', deps.db.raw('?', [id])))
    .where({ 's.code': code, 's.merchant_id': scope.merchantId, 's.mode': scope.mode })
    .first('a.*', ...pollSessionSelect);
  if (!row) throw sessionNotFound();
  if (row.id === null) throw attemptNotFound();
  await verifyOnReturn(deps, row);
  return attemptPollOut(row, pollSessionOf(row));
}

/**
 * The merchant's attempt in the key's mode with its session and the merchant's display, read in
 * one statement (one moment); another merchant's or mode's attempt is `404 attempt_not_found`.
 */
export async function attemptWithSession(deps: PublicDeps, scope: MerchantScope, attemptId: string) {
  if (!isObjectId(attemptId)) throw attemptNotFound();
  const row: (AttemptRow & MerchantDisplay & Record<string, unknown>) | undefined = await deps
    .db('payment_attempts as a')
    .join('checkout_sessions as s', 's.id', 'a.session_id')
    .join('merchants as m', 'm.id', 'a.merchant_id')
    .where({ 'a.id': attemptId, 'a.merchant_id': scope.merchantId, 'a.mode': scope.mode })
    .first('a.*', ...pollSessionSelect, 'm.display_name', 'm.logo_url', 'm.accent');
  if (!row) throw attemptNotFound();
  const merchant: MerchantDisplay = { display_name: row.display_name, logo_url: row.logo_url, accent: row.accent };
  return { attempt: row as AttemptRow, session: pollSessionOf(row), merchant };
}

/** `GET /public/attempts/{attempt_id}`: the poll without the session code, for a return page opened elsewhere. */
export async function lookupAttempt(deps: PublicDeps, scope: MerchantScope, attemptId: string) {
  const { attempt, session, merchant } = await attemptWithSession(deps, scope, attemptId);
  await verifyOnReturn(deps, attempt);
  return attemptLookupOut(attempt, session, merchant);
}
