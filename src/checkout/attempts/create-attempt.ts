import { ApiError, ErrorDetail } from '../../http/errors';
import { hit } from '../../http/rate-limit';
import { newId } from '../../lib/ids';
import { log } from '../../lib/log';
import { handOff, recordHandoff } from '../../temporal/handoffs';
import { publicLimits } from '../public-limits';
import { phoneNotVerified } from '../public/customer';
import { customerTokenValid } from '../public/customer-tokens';
import type { PublicDeps } from '../public/deps';
import { offeredMethods, publicContext } from '../public/public-session';
import { assertOpen, sessionByCode } from '../public/session-lookup';
import type { AttemptIn } from '../schemas';
import type { MerchantScope } from '../sessions/deps';
import type { SessionRow } from '../sessions/session-row';
import type { AttemptRow } from './attempt-row';
import { beginAttempt, completeOffline, NewAttempt, Refusal, settleAttempt } from './transitions';

export interface CreatedAttempt {
  attempt: AttemptRow;
  session: SessionRow;
  /** Where the shopper goes next (redirect flow); null for an offline attempt. */
  redirectUrl: string | null;
}

const attemptInProgress = () =>
  ApiError.conflict('attempt_in_progress', 'A payment attempt for this session is still with the vendor.');

function refused(refusal: Refusal): ApiError {
  return refusal === 'in_progress'
    ? attemptInProgress()
    : ApiError.conflict('session_not_open', 'The session is no longer open.');
}

const methodNotAvailable = (issue: string, message: string) =>
  new ApiError(422, 'method_not_available', message, [{ field: 'method', issue }]);

/** The shopper details the session collects as required and does not have yet. */
function missingDetails(session: SessionRow): ErrorDetail[] {
  const missing: ErrorDetail[] = [];
  if (session.collect.name === 'required' && !session.customer.name) {
    missing.push({ field: 'customer.name', issue: 'required' });
  }
  if (session.collect.shipping_address === 'required' && !session.customer.address) {
    missing.push({ field: 'customer.address', issue: 'required' });
  }
  return missing;
}

/**
 * `POST /public/sessions/{code}/attempts`: starts paying an open session with `method`.
 * Cash on delivery completes the session at once (offline). A redirect method sends the session
 * to the vendor: it reads `processing`, the session workflow takes the attempt over, and the
 * shopper goes to the vendor's page. An initiation the vendor refuses is `502 gateway_error`
 * with the attempt failed and the session open again.
 */
export async function createAttempt(
  deps: PublicDeps,
  scope: MerchantScope,
  code: string,
  input: AttemptIn,
  customerToken: string | undefined,
): Promise<CreatedAttempt> {
  const { db } = deps;
  const now = deps.clock();
  const session = await sessionByCode(db, scope, code);
  if (session.status === 'processing') throw attemptInProgress();
  assertOpen(session, now);

  const offered = offeredMethods(session, await publicContext(db, session)).find((a) => a.method.code === input.method);
  if (!offered) throw methodNotAvailable('not_offered', `${input.method} is not offered on this session.`);
  if (!offered.available || !offered.presented) {
    throw methodNotAvailable(
      offered.unavailableReason ?? 'unavailable',
      `${input.method} cannot take this payment (${offered.unavailableReason}).`,
    );
  }
  if (session.collect.phone === 'required' && !(await customerTokenValid(db, session.id, customerToken, now))) {
    throw phoneNotVerified();
  }
  const missing = missingDetails(session);
  if (missing.length > 0) {
    throw ApiError.validation('The session requires these shopper details first (PUT …/customer).', missing);
  }
  const gateway = deps.gateways[input.method];
  if (!gateway || !gateway.configured(session.mode)) {
    throw new ApiError(503, 'gateway_not_configured', `The ${input.method} vendor has no credentials for this mode.`);
  }
  const limit = await hit(db, `attempts:${session.id}`, publicLimits.attemptsPerSession, now);
  if (!limit.allowed) {
    const { limit: n, windowSeconds } = publicLimits.attemptsPerSession;
    throw ApiError.rateLimited(
      limit.retryAfter,
      `At most ${n} payment attempts per session every ${windowSeconds / 60} minutes.`,
    );
  }

  const attempt: NewAttempt = {
    id: newId('pa', scope.mode === 'test' ? 'test' : undefined),
    method: input.method,
    gateway: gateway.name,
    flow: offered.method.flow,
    presented_amount: offered.presented.amount,
    presented_currency: offered.presented.currency,
    fx_rate: offered.presented.fxRate,
    gateway_reference: null,
  };
  const publicBaseUrl = deps.publicBaseUrl;

  if (attempt.flow === 'offline') {
    const done = await completeOffline(db, { session, attempt, now, publicBaseUrl });
    if (typeof done === 'string') throw refused(done);
    await handOff(deps, [done.handoff]);
    return { attempt: done.attempt, session: done.session, redirectUrl: null };
  }

  // The attempt's handoff to the session workflow commits with it, before the vendor hears of it,
  // so nothing pending is ever orphaned: delivered now, or by the relay if this process dies first.
  const begun = await beginAttempt(db, { session, attempt, now, merchantName: scope.merchantName });
  if (typeof begun === 'string') throw refused(begun);
  await handOff(deps, [begun.handoff]);

  let initiated: { gatewayReference: string | null; redirectUrl: string | null };
  try {
    initiated = await gateway.initiate(
      {
        id: attempt.id,
        mode: scope.mode,
        presentedAmount: attempt.presented_amount,
        presentedCurrency: attempt.presented_currency,
      },
      publicBaseUrl,
    );
  } catch (err) {
    log.warn('payment initiation failed', {
      attempt_id: attempt.id,
      gateway: gateway.name,
      error: err,
    });
    // Failed with its handoff in one transaction, so the workflow stops waiting for it.
    const resolved = await db.transaction(async (trx) => {
      const at = deps.clock();
      await settleAttempt(trx, {
        attemptId: attempt.id,
        outcome: 'failed',
        reason: 'gateway_error',
        expireIfDue: new Date(session.expires_at).getTime() <= at.getTime(),
        now: at,
        publicBaseUrl,
      });
      return recordHandoff(
        trx,
        { merchantId: session.merchant_id, mode: session.mode },
        { kind: 'attempt_resolved', sessionId: session.id, attemptId: attempt.id, status: 'failed' },
      );
    });
    await handOff(deps, [resolved]);
    throw new ApiError(
      502,
      'gateway_error',
      'The payment vendor could not start the payment; the attempt failed and the session is open again.',
    );
  }
  const [started]: AttemptRow[] = await db('payment_attempts')
    .where({ id: attempt.id })
    .update({ gateway_reference: initiated.gatewayReference })
    .returning('*');
  return { attempt: started, session: begun.session, redirectUrl: initiated.redirectUrl };
}
