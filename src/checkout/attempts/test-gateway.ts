import { ApiError } from '../../http/errors';
import { signalDecision, TestGatewayDecision } from '../../temporal/session';
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
 * first button of a pending attempt is recorded and passed to the session workflow, which settles
 * the attempt (the answer still says `pending`; the return page polls for the outcome). Once a
 * button was pressed or the shopper came back without one, it is `409 attempt_already_decided`.
 */
export async function decideTestAttempt(
  deps: PublicDeps,
  scope: MerchantScope,
  attemptId: string,
  decision: TestGatewayDecision,
) {
  const attempt = assertTestGateway(await attemptInScope(deps, scope, attemptId));
  const undecided = () =>
    deps
      .db('payment_attempts')
      .where({ id: attempt.id, status: 'pending' })
      .whereNull('decision')
      .whereNull('verify_requested_at');
  const [decided]: AttemptRow[] = await undecided().update({ decision, updated_at: deps.clock() }).returning('*');
  if (!decided) {
    const state = attempt.status === 'pending' ? 'already being decided' : attempt.status;
    throw ApiError.conflict('attempt_already_decided', `This attempt is ${state}; its outcome can no longer change.`);
  }
  try {
    await signalDecision(deps.temporal, attempt.session_id, attempt.id, decision);
  } catch (err) {
    // Unrecorded, so the shopper can press again.
    await deps.db('payment_attempts').where({ id: attempt.id, status: 'pending', decision }).update({ decision: null });
    throw err;
  }
  return { attempt_id: decided.id, status: decided.status, return_url: returnUrl(deps.publicBaseUrl, decided.id) };
}
