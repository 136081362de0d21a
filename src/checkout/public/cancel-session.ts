import { ApiError } from '../../http/errors';
import { handOff } from '../../temporal/handoffs';
import type { MerchantScope } from '../sessions/deps';
import type { SessionRow } from '../sessions/session-row';
import { cancelOpenSession } from '../sessions/transitions';
import type { PublicDeps } from './deps';
import { assertOpen, sessionByCode } from './session-lookup';

/**
 * `POST /public/sessions/{code}/cancel`: the shopper gives up on the page. An open session becomes
 * `canceled` with `checkout.session.canceled` and the handoff that tells its workflow to drop the
 * timer; the page then sends the shopper to `cancel_url`. A session with a payment under way is
 * `409 session_not_open`.
 */
export async function cancelSession(deps: PublicDeps, scope: MerchantScope, code: string): Promise<SessionRow> {
  const now = deps.clock();
  const session = await sessionByCode(deps.db, scope, code);
  assertOpen(session, now);
  const result = await cancelOpenSession(deps.db, {
    sessionId: session.id,
    publicBaseUrl: deps.publicBaseUrl,
    now,
    settledBy: 'shopper canceled',
  });
  if (!result?.handoff) {
    throw ApiError.conflict('session_not_open', `The session is ${result?.session.status ?? 'gone'}, not open.`);
  }
  await handOff(deps, [result.handoff]);
  return result.session;
}
