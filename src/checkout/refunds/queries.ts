import type { Db } from '../../db/knex';
import { isObjectId } from '../ids';
import type { MerchantScope } from '../sessions/deps';
import type { RefundRow } from './refund-row';
import { type Keyset, newestFirst } from '../cursor';

/** The merchant's refund in `mode`; another merchant's or mode's is null, like a missing one. */
export async function getRefund(db: Db, scope: MerchantScope, id: string): Promise<RefundRow | null> {
  if (!isObjectId(id)) return null;
  return (await db('refunds').where({ id, merchant_id: scope.merchantId, mode: scope.mode }).first()) ?? null;
}

/** One page of the merchant's refunds in `mode` (of one session, if given), newest first. */
export async function listRefunds(
  db: Db,
  scope: MerchantScope,
  opts: { sessionId?: string; after?: Keyset; limit: number },
) {
  const query = db('refunds').where({ merchant_id: scope.merchantId, mode: scope.mode });

  if (opts.sessionId !== undefined) query.andWhere({ session_id: opts.sessionId });
  return newestFirst<RefundRow>(query, opts.after, opts.limit);
}
