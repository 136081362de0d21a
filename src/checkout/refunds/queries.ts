import type { Db } from '../../db/knex';
import { isObjectId } from '../ids';
import type { MerchantScope } from '../sessions/deps';
import type { RefundRow } from './refund-row';

/** The merchant's refund in `mode`; another merchant's or mode's is null, like a missing one. */
export async function getRefund(db: Db, scope: MerchantScope, id: string): Promise<RefundRow | null> {
  if (!isObjectId(id)) return null;
  return (await db('refunds').where({ id, merchant_id: scope.merchantId, mode: scope.mode }).first()) ?? null;
}

/** One page of the merchant's refunds in `mode` (of one session, if given), newest first. */
export async function listRefunds(
  db: Db,
  scope: MerchantScope,
  opts: { sessionId?: string; after?: { createdAt: string; id: string }; limit: number },
) {
  const query = db('refunds')
    .where({ merchant_id: scope.merchantId, mode: scope.mode })
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ])
    .limit(opts.limit + 1);
  if (opts.sessionId !== undefined) query.andWhere({ session_id: opts.sessionId });
  if (opts.after) query.andWhereRaw('(created_at, id) < (?::timestamptz, ?)', [opts.after.createdAt, opts.after.id]);
  const rows: RefundRow[] = await query;
  return { rows: rows.slice(0, opts.limit), hasMore: rows.length > opts.limit };
}
