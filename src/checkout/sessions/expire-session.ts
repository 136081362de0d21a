import { ApiError } from '../../http/errors';
import { handOff } from '../../temporal/handoffs';
import { isObjectId } from '../ids';
import type { MerchantScope, SessionDeps } from './deps';
import type { SessionRow } from './session-row';
import { expireOpenSession } from './transitions';

/**
 * `POST /checkout/sessions/{id}/expire`: expires an open session of this merchant and mode (with
 * its event and the handoff that tells its workflow to drop the timer). Another merchant's or
 * mode's session is `404 session_not_found`; a session that is not open is `409 session_not_open`.
 */
export async function expireSession(deps: SessionDeps, scope: MerchantScope, sessionId: string): Promise<SessionRow> {
  const notFound = () => ApiError.notFound('session_not_found', 'No such checkout session.');
  if (!isObjectId(sessionId)) throw notFound();
  const result = await expireOpenSession(deps.db, {
    sessionId,
    scope,
    publicBaseUrl: deps.publicBaseUrl,
    now: deps.clock(),
    settledBy: 'POST /expire',
  });
  if (!result) throw notFound();
  if (!result.handoff)
    throw ApiError.conflict('session_not_open', `The session is ${result.session.status}, not open.`);
  await handOff(deps, [result.handoff]);
  return result.session;
}
