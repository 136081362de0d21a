import type { Db } from '../../db/knex';
import { isObjectId } from '../ids';
import type { MerchantScope } from './deps';
import type { SessionRow } from './session-row';
import { type Keyset, newestFirst } from '../cursor';

/** The merchant's session in `mode`; another merchant's or mode's is null, like a missing one. */
export async function getSession(db: Db, scope: MerchantScope, id: string): Promise<SessionRow | null> {
  if (!isObjectId(id)) return null;
  return (await db('checkout_sessions').where({ id, merchant_id: scope.merchantId, mode: scope.mode }).first()) ?? null;
}

/** One page of the merchant's sessions in `mode`, newest first, keyset-paged on (created_at, id). */
export async function listSessions(
  db: Db,
  scope: MerchantScope,
  opts: {
    referenceId?: string;
    status?: string;
    createdAfter?: Date;
    /** Created before this time (the console's date range; the API has no such filter). */
    createdBefore?: Date;
    after?: Keyset;
    limit: number;
  },
) {
  const query = db('checkout_sessions').where({ merchant_id: scope.merchantId, mode: scope.mode });

  if (opts.referenceId !== undefined) query.andWhere({ reference_id: opts.referenceId });
  if (opts.status !== undefined) query.andWhere({ status: opts.status });
  if (opts.createdAfter !== undefined) query.andWhere('created_at', '>', opts.createdAfter);
  if (opts.createdBefore !== undefined) query.andWhere('created_at', '<', opts.createdBefore);
  return newestFirst<SessionRow>(query, opts.after, opts.limit);
}
