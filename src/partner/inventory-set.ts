import type { Db } from '../db/knex';
import { bulkUpdateInventory } from './inventory-bulk';
import { findInventoryItem } from './inventory-read';

/** What a guarded write sets: the level at the primary location, or the list price. */
export type InventoryField = 'on_hand' | 'price_iqd';

export type GuardedSetResult =
  | { outcome: 'written'; sku: string; from: string | null; to: number }
  /** The value moved since the page read it: `current` is the value now; nothing was written. */
  | { outcome: 'stale'; sku: string; current: string | null }
  /** `PATCH /inventory/bulk`'s refusal of the row (its code and message); nothing was written. */
  | { outcome: 'rejected'; sku: string; code: string; message: string }
  /** Not an inventory item of the seller (another seller's variant, none, or a SKU's later variant). */
  | { outcome: 'not_found' };

/** A value as a page shows it: a whole or decimal number. */
const NUMBER_TEXT = /^\d{1,30}(\.\d{1,30})?$/;

/** Ends the transaction (rolled back) with `result`. */
class Abort extends Error {
  constructor(readonly result: GuardedSetResult) {
    super(result.outcome);
  }
}

/**
 * Sets one SKU's stock at the primary location or its list price through `PATCH /inventory/bulk`'s
 * own service (its checks and refusals), only if the value is still `expected`, the one the
 * page read (null: no stock row, read as 0): a compare-and-set in one transaction, the value's row
 * locked (the stock row, made at 0 if missing; or the variant row), compared, then written by the
 * service's statement. A value that moved is `stale`, with the value now, and nothing is written.
 */
export async function setInventoryIfUnchanged(
  db: Db,
  sellerId: string,
  input: { variantId: string; field: InventoryField; value: number; expected: string | null },
): Promise<GuardedSetResult> {
  try {
    return await db.transaction(async (trx) => {
      const item = await findInventoryItem(trx, sellerId, input.variantId);
      if (!item) return { outcome: 'not_found' } as const;
      const { sku } = item;
      const expected = input.expected ?? '0';
      if (!NUMBER_TEXT.test(expected)) {
        throw new Abort({
          outcome: 'rejected',
          sku,
          code: 'validation_error',
          message: 'The value read is not a number.',
        });
      }
      let current: { value: string | null; same: boolean } | null;
      if (input.field === 'price_iqd') {
        const { rows } = await trx.raw(
          'SELECT price::text AS value, price = ?::numeric AS same FROM variants WHERE id = ? FOR NO KEY UPDATE',
          [expected, item.variant_id],
        );
        current = rows[0];
      } else {
        // The row at the primary location, made at 0 if missing, so a concurrent first write waits for this one.
        await trx.raw(
          `INSERT INTO stock_levels (variant_id, location_id, level)
           SELECT ?, id, 0 FROM stock_locations WHERE seller_id = ? ORDER BY position LIMIT 1
           ON CONFLICT DO NOTHING`,
          [item.variant_id, sellerId],
        );
        const { rows } = await trx.raw(
          `SELECT level::text AS value, level = ?::numeric AS same FROM stock_levels
            WHERE variant_id = ? AND location_id = ? FOR UPDATE`,
          [expected, item.variant_id, item.location_id],
        );
        // No stock location: nothing to compare; the service refuses the row.
        current = rows[0] ?? null;
      }
      if (current && !current.same) throw new Abort({ outcome: 'stale', sku, current: current.value });
      const [result] = await bulkUpdateInventory(trx, sellerId, [{ external_sku: sku, [input.field]: input.value }]);
      if (result.status === 'rejected') throw new Abort({ outcome: 'rejected', sku, ...result.error! });
      return {
        outcome: 'written',
        sku,
        from: input.field === 'on_hand' ? item.on_hand : String(item.price),
        to: input.value,
      } as const;
    });
  } catch (err) {
    if (err instanceof Abort) return err.result;
    throw err;
  }
}
