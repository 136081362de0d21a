import { ApiError } from '../../http/errors';
import { log } from '../../lib/log';
import { WorkflowNotFoundError } from '@temporalio/client';
import { callTimeoutOf } from '../../temporal/client';
import { decisionUpdateFallbacks } from '../../telemetry/checkout';
import { decideByUpdate, signalDecision, TestGatewayDecision } from '../../temporal/session';
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
 * first button of a pending attempt is recorded, then passed to the session workflow as an Update,
 * which settles the attempt and answers with its status in the same call (`succeeded`, `failed`,
 * `canceled`; `pending` when the outcome is not immediate: the slow button, amount rules 002 and
 * 003). When the Update fails (a run of the previous release, its 2 s deadline) the decision goes
 * as a signal and the answer says `pending` (the return page hears the outcome). When that fails
 * too, the decision is taken back so the shopper can press again: `503 service_unavailable` with
 * Retry-After (also while the session's workflow is not started yet); unless the attempt was
 * settled meanwhile (the late Update applied), which answers its status. Once a button was pressed or
 * the shopper came back without one, it is `409 attempt_already_decided`.
 *
 * The durable fallback (the decision written with an `attempt_decided` handoff, delivered by the
 * relay) waits for the next release: this release's relay delivers that kind, the previous
 * release's relay does not know it, and both run side by side during a rollout.
 */
export async function decideTestAttempt(
  deps: PublicDeps,
  scope: MerchantScope,
  attemptId: string,
  decision: TestGatewayDecision,
) {
  const attempt = assertTestGateway(await attemptInScope(deps, scope, attemptId));
  const [decided]: AttemptRow[] = await deps
    .db('payment_attempts')
    .where({ id: attempt.id, status: 'pending' })
    .whereNull('decision')
    .whereNull('verify_requested_at')
    .update({ decision, updated_at: deps.clock() })
    .returning('*');
  if (!decided) {
    const state = attempt.status === 'pending' ? 'already being decided' : attempt.status;
    throw ApiError.conflict('attempt_already_decided', `This attempt is ${state}; its outcome can no longer change.`);
  }
  const answer = (status: string) => ({
    attempt_id: decided.id,
    status,
    return_url: returnUrl(deps.publicBaseUrl, decided.id),
  });
  // Both calls within one Temporal call's deadline: the press answers within TEMPORAL_CALL_TIMEOUT_MS.
  const deadline = Date.now() + callTimeoutOf(deps.temporal);
  try {
    const { attemptStatus } = await decideByUpdate(deps.temporal, attempt.session_id, attempt.id, decision, deadline);
    return answer(attemptStatus);
  } catch (err) {
    decisionUpdateFallbacks.inc();
    log.info('the decision Update failed; the decision goes as a signal', { attempt_id: attempt.id, error: err });
  }
  try {
    await deps.temporal.connection.withDeadline(deadline, () =>
      signalDecision(deps.temporal, attempt.session_id, attempt.id, decision),
    );
  } catch (err) {
    // Unrecorded, so the shopper can press again, unless the workflow settled the attempt meanwhile:
    // an Update that passed its deadline was still applied, and the session's workflow may have
    // ended with the payment (so the signal found none). The shopper then hears the outcome.
    const takenBack = await deps
      .db('payment_attempts')
      .where({ id: attempt.id, status: 'pending', decision })
      .update({ decision: null });
    if (takenBack === 0) {
      const settled = await deps.db('payment_attempts').where({ id: attempt.id }).first('status');
      if (settled && settled.status !== 'pending') return answer(settled.status);
    }
    if (err instanceof WorkflowNotFoundError) throw ApiError.serviceUnavailable();
    throw err;
  }
  return answer(decided.status);
}
