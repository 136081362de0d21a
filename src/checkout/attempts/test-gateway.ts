import { ApiError } from '../../http/errors';
import { log } from '../../lib/log';
import { handOff, handoffsDelivered, insertWithHandoff } from '../../temporal/handoffs';
import { decideByUpdate, TestGatewayDecision } from '../../temporal/session';
import type { PublicDeps } from '../public/deps';
import type { MerchantScope } from '../sessions/deps';
import { AttemptRow, returnUrl } from './attempt-row';
import { attemptInScope, attemptWithSession } from './polls';

/** Only an attempt the test gateway runs has its page and buttons: `403 forbidden` for any other. */
function assertTestGateway(attempt: AttemptRow): AttemptRow {
  if (attempt.gateway !== 'test') {
    throw ApiError.forbidden('forbidden', 'This attempt is not a test-gateway attempt.');
  }
  return attempt;
}

/** `GET /public/test-gateway/{attempt_id}`: what the simulated vendor's page shows (one statement, one moment). */
export async function readTestGatewayAttempt(deps: PublicDeps, scope: MerchantScope, attemptId: string) {
  const { attempt, merchant } = await attemptWithSession(deps, scope, attemptId);
  assertTestGateway(attempt);
  return {
    attempt_id: attempt.id,
    status: attempt.status,
    amount: attempt.presented_amount,
    currency: attempt.presented_currency,
    merchant: { display_name: merchant.display_name },
    livemode: attempt.mode === 'live',
    return_url: returnUrl(deps.publicBaseUrl, attempt.id),
  };
}

/**
 * `POST /public/test-gateway/{attempt_id}/decide`: a button on the simulated vendor's page. The
 * first button of a pending attempt is recorded with its handoff to the session workflow (one
 * statement), then passed to the workflow as an Update, which settles the attempt and answers with
 * its status in the same call (`succeeded`, `failed`, `canceled`; `pending` when the outcome is
 * not immediate: the slow button, amount rules 002 and 003). When the Update fails (a run of the
 * previous release, a deadline, Temporal down) the handoff is delivered as a signal, now or by the
 * relay, and the answer says `pending` (the return page hears the outcome). Once a button was
 * pressed or the shopper came back without one, it is `409 attempt_already_decided`.
 */
export async function decideTestAttempt(
  deps: PublicDeps,
  scope: MerchantScope,
  attemptId: string,
  decision: TestGatewayDecision,
) {
  const attempt = assertTestGateway(await attemptInScope(deps, scope, attemptId));
  const recorded = await insertWithHandoff<AttemptRow>(
    deps.db,
    deps
      .db('payment_attempts')
      .where({ id: attempt.id, status: 'pending' })
      .whereNull('decision')
      .whereNull('verify_requested_at')
      .update({ decision, updated_at: deps.clock() })
      .returning('*'),
    { merchantId: attempt.merchant_id, mode: attempt.mode },
    { kind: 'attempt_decided', sessionId: attempt.session_id, attemptId: attempt.id, decision },
  );
  if (!recorded) {
    const state = attempt.status === 'pending' ? 'already being decided' : attempt.status;
    throw ApiError.conflict('attempt_already_decided', `This attempt is ${state}; its outcome can no longer change.`);
  }
  const { row: decided, pending } = recorded;
  let status: string = decided.status;
  try {
    status = (await decideByUpdate(deps.temporal, attempt.session_id, attempt.id, decision)).attemptStatus;
    handoffsDelivered(deps.db, [pending]);
  } catch (err) {
    log.warn('the decision Update failed; its handoff delivers it as a signal', { attempt_id: attempt.id, error: err });
    await handOff(deps, [pending]);
  }
  return { attempt_id: decided.id, status, return_url: returnUrl(deps.publicBaseUrl, decided.id) };
}
