import type { Db } from '../db/knex';
import { intInRange } from './checks';
import { iso } from '../lib/time';
import { requireSeller } from './lookups';

export interface LedgerEntryOut {
  kind: 'external_sale_revenue' | 'external_sale_cogs' | 'damaged_write_off';
  amount: number;
  external_sku: string;
  variant_id: string;
  adjustment_id: string;
  created_at: string;
}

/** The seller's ledger entries (booked by stock adjustments), newest first. */
export async function listLedger(
  db: Db,
  input: { sellerId: string; limit?: number },
): Promise<{ seller_id: string; entries: LedgerEntryOut[] }> {
  const limit = intInRange(input.limit ?? 100, 'limit', 1, 1000);
  await requireSeller(db, input.sellerId);
  const rows = await db('seller_ledger_entries')
    .where({ seller_id: input.sellerId })
    .orderBy('id', 'desc')
    .limit(limit)
    .select('kind', 'amount', 'external_sku', 'variant_id', 'adjustment_id', 'created_at');
  return { seller_id: input.sellerId, entries: rows.map((r) => ({ ...r, created_at: iso(r.created_at) })) };
}
