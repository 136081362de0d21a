import { ApiError } from '../../http/errors';
import { log } from '../../lib/log';
import { isObjectId } from '../ids';
import type { PublicDeps } from '../public/deps';
import { publicContext } from '../public/public-session';
import { sessionByCode } from '../public/session-lookup';
import type { MerchantScope } from '../sessions/deps';
import type { SessionRow } from '../sessions/session-row';
import { AttemptRow, attemptLookupOut, attemptPollOut } from './attempt-row';
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

/** `GET /public/sessions/{code}/attempts/{attempt_id}`: the attempt poll. */
export async function pollAttempt(deps: PublicDeps, scope: MerchantScope, code: string, attemptId: string) {
  const session = await sessionByCode(deps.db, scope, code);
  const attempt = await attemptInScope(deps, scope, attemptId);
  if (attempt.session_id !== session.id) throw attemptNotFound();
  await verifyOnReturn(deps, attempt);
  return attemptPollOut(attempt, session);
}

/** `GET /public/attempts/{attempt_id}`: the poll without the session code, for a return page opened elsewhere. */
export async function lookupAttempt(deps: PublicDeps, scope: MerchantScope, attemptId: string) {
  const attempt = await attemptInScope(deps, scope, attemptId);
  const session: SessionRow = await deps.db('checkout_sessions').where({ id: attempt.session_id }).first();
  await verifyOnReturn(deps, attempt);
  return attemptLookupOut(attempt, session, (await publicContext(deps.db, session)).merchant);
}
