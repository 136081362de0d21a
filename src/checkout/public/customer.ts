import { ApiError } from '../../http/errors';
import type { CustomerIn } from '../schemas';
import type { MerchantScope } from '../sessions/deps';
import type { SessionRow } from '../sessions/session-row';
import { customerTokenValid } from './customer-tokens';
import type { PublicDeps } from './deps';
import { assertOpen, sessionByCode } from './session-lookup';

/** `403 phone_not_verified`: this session requires a verified phone and no valid customer token was sent. */
export const phoneNotVerified = () =>
  ApiError.forbidden(
    'phone_not_verified',
    'This session requires a verified phone: verify it by SMS code and send the customer token.',
  );

/**
 * `PUT /public/sessions/{code}/customer`: sets the shopper's name and shipping address on an open
 * session. A session that requires a verified phone takes it only with a valid customer token.
 */
export async function updateCustomer(
  deps: PublicDeps,
  scope: MerchantScope,
  code: string,
  input: CustomerIn,
  token: string | undefined,
): Promise<{ session: SessionRow; tokenValid: boolean }> {
  const { db } = deps;
  const now = deps.clock();
  const session = await sessionByCode(db, scope, code);
  assertOpen(session, now);
  const tokenValid = await customerTokenValid(db, session.id, token, now);
  if (session.collect.phone === 'required' && !tokenValid) throw phoneNotVerified();
  const patch = {
    ...(input.name !== undefined ? { name: input.name } : {}),
    ...(input.address !== undefined
      ? { address: { ...input.address, landmark: input.address.landmark ?? null, geo: input.address.geo ?? null } }
      : {}),
  };
  const [updated]: SessionRow[] = await db('checkout_sessions')
    .where({ id: session.id, status: 'open' })
    .update({ customer: db.raw('customer || ?::jsonb', [JSON.stringify(patch)]), updated_at: now })
    .returning('*');
  if (!updated) throw ApiError.conflict('session_not_open', 'The session is no longer open.');
  return { session: updated, tokenValid };
}
