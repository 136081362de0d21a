import { ApiError } from '../../http/errors';
import { handOff, recordHandoff } from '../../temporal/handoffs';
import type { FastForward } from '../../temporal/session';
import { attemptClockStartMs, type AttemptRow } from '../attempts/attempt-row';
import { isObjectId } from '../ids';
import type { MerchantScope, SessionDeps } from './deps';
import type { SessionRow } from './session-row';

/**
 * `POST /test_helpers/checkout/sessions/{id}/fast_forward` (test keys only): moves the open
 * session's `expires_at` and its pending attempt's clocks (the amount rule's 30 seconds, the slow
 * button's 90, the 24-hour timeout) `seconds` earlier, as if that time had passed, and hands the
 * moved times to the session workflow in the same transaction; the workflow re-arms its timers,
 * so expiry or a timeout follows at once with its events, as in real time. A session that is no
 * longer open or processing has no clock left: `409 session_not_open`.
 */
export async function fastForwardSession(
  deps: SessionDeps,
  scope: MerchantScope,
  sessionId: string,
  seconds: number,
): Promise<SessionRow> {
  const notFound = () => ApiError.notFound('session_not_found', 'No such checkout session.');
  if (!isObjectId(sessionId)) throw notFound();
  const ms = seconds * 1000;
  const { session, pending } = await deps.db.transaction(async (trx) => {
    const [session]: SessionRow[] = await trx('checkout_sessions')
      .where({ id: sessionId, merchant_id: scope.merchantId, mode: scope.mode })
      .whereIn('status', ['open', 'processing'])
      .update({ expires_at: trx.raw('expires_at - make_interval(secs => ?)', [seconds]), updated_at: deps.clock() })
      .returning('*');
    if (!session) {
      const other = await trx('checkout_sessions')
        .where({ id: sessionId, merchant_id: scope.merchantId, mode: scope.mode })
        .first('status');
      if (!other) throw notFound();
      throw ApiError.conflict('session_not_open', `The session is ${other.status}: it has no clock to move.`);
    }
    const [attempt]: AttemptRow[] = await trx('payment_attempts')
      .where({ session_id: sessionId, status: 'pending' })
      .increment('fast_forwarded_ms', ms)
      .returning('*');
    const moved: FastForward = {
      expiresAtMs: new Date(session.expires_at).getTime(),
      ...(attempt ? { attempt: { attemptId: attempt.id, startedAtMs: attemptClockStartMs(attempt) } } : {}),
    };
    const handoff = await recordHandoff(trx, scope, { kind: 'session_fast_forwarded', sessionId, moved });
    return { session, pending: handoff };
  });
  await handOff(deps, [pending]);
  return session;
}
