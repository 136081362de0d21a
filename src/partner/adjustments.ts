import type { Db } from '../db/knex';
import { ApiError } from '../http/errors';
import { newId } from '../lib/ids';
import { log } from '../lib/log';
import type { AdjustmentIn } from './schemas';

export interface AdjustmentRowOut {
  adjustment_id: string;
  external_sku: string;
  variant_id: string;
  location_id: string;
  delta: number;
  stocked_quantity: number;
}

/** `units × unitAmount` in bigint; null beyond 2^53 − 1, an amount the ledger could not give back exactly. */
function ledgerAmount(units: number, unitAmount: number): number | null {
  const amount = BigInt(units) * BigInt(unitAmount);
  return amount <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(amount) : null;
}

interface Resolved {
  index: number;
  sku: string;
  delta: number;
  variantId: string;
  locationId: string;
  unitCost: number | null;
}

/**
 * Resolves SKUs and locations to the seller's rows: an unknown one refuses the whole request (404);
 * then a row without a location when the seller has none refuses it (422).
 */
async function resolve(db: Db, sellerId: string, input: AdjustmentIn): Promise<Resolved[]> {
  const [variants, locations] = await Promise.all([
    db.raw(
      `SELECT DISTINCT ON (v.sku) v.sku, v.id, v.unit_cost FROM variants v
        WHERE v.seller_id = ? AND v.sku = ANY(?) ORDER BY v.sku, v.product_id, v.id`,
      [sellerId, input.items.map((i) => i.external_sku)],
    ),
    db('stock_locations').where({ seller_id: sellerId }).orderBy('position').select('id'),
  ]);
  const bySku = new Map<string, { id: string; unit_cost: number | null }>(
    variants.rows.map((v: { sku: string }) => [v.sku, v]),
  );
  const locationIds = new Set<string>(locations.map((l: { id: string }) => l.id));
  for (const item of input.items) {
    if (!bySku.has(item.external_sku))
      throw ApiError.notFound('inventory_item_not_found', `No inventory item has SKU ${item.external_sku}.`);
    if (item.location_id != null && !locationIds.has(item.location_id)) {
      throw ApiError.notFound('inventory_item_not_found', `${item.location_id} is not one of your stock locations.`);
    }
  }
  const primary: string | undefined = locations[0]?.id;
  return input.items.map((item, index) => {
    const variant = bySku.get(item.external_sku)!;
    const locationId = item.location_id ?? primary;
    if (locationId === undefined) {
      throw ApiError.validation(
        'The seller has no stock location configured.',
        [{ field: `items[${index}].location_id`, issue: 'missing' }],
        422,
      );
    }
    return {
      index,
      sku: item.external_sku,
      delta: item.delta,
      variantId: variant.id,
      locationId,
      unitCost: variant.unit_cost,
    };
  });
}

/**
 * `POST /inventory/adjustments`: all or nothing in one transaction. The stock rows are locked in
 * a fixed order, so concurrent requests serialise and none can take a level below zero. `keyId`
 * is the Partner key that asked, null for the seller's console.
 */
export async function applyAdjustments(
  db: Db,
  principal: { sellerId: string; keyId: string | null },
  input: AdjustmentIn,
): Promise<AdjustmentRowOut[]> {
  const rows = await resolve(db, principal.sellerId, input);
  // Cost of goods and write-offs (units × unit cost) must be exact amounts too.
  const costed = input.category === 'damaged' || (input.category === 'external_sale' && input.unit_value != null);
  const overflow = rows.filter(
    (r) => costed && r.delta < 0 && r.unitCost !== null && !ledgerAmount(-r.delta, r.unitCost),
  );
  if (overflow.length > 0) {
    throw ApiError.validation(
      `units × unit cost is beyond ${Number.MAX_SAFE_INTEGER} IQD.`,
      overflow.map((r) => ({ field: `items[${r.index}].delta`, issue: 'invalid' })),
    );
  }
  const out = await db.transaction(async (trx) => {
    const pairs = [...rows].sort((a, b) => (a.variantId + a.locationId < b.variantId + b.locationId ? -1 : 1));
    await trx.raw(
      `INSERT INTO stock_levels (variant_id, location_id, level)
       SELECT * FROM unnest(?::text[], ?::text[], ?::numeric[]) ON CONFLICT DO NOTHING`,
      [pairs.map((p) => p.variantId), pairs.map((p) => p.locationId), pairs.map(() => 0)],
    );
    const locked = await trx.raw(
      `SELECT variant_id, location_id, level FROM stock_levels
        WHERE (variant_id, location_id) IN (SELECT * FROM unnest(?::text[], ?::text[]))
        ORDER BY variant_id, location_id FOR UPDATE`,
      [pairs.map((p) => p.variantId), pairs.map((p) => p.locationId)],
    );
    const levels = new Map<string, number>(
      locked.rows.map((r: { variant_id: string; location_id: string; level: string }) => [
        `${r.variant_id}/${r.location_id}`,
        Number(r.level),
      ]),
    );
    const negative = rows.filter((r) => levels.get(`${r.variantId}/${r.locationId}`)! + r.delta < 0);
    if (negative.length > 0) {
      throw ApiError.validation(
        'The adjustment would take stock below zero.',
        negative.map((r) => ({ field: `items[${r.index}].delta`, issue: 'negative_result' })),
        422,
      );
    }
    await trx.raw(
      `UPDATE stock_levels s SET level = s.level + u.delta, updated_at = now()
         FROM unnest(?::text[], ?::text[], ?::numeric[]) AS u(variant_id, location_id, delta)
        WHERE s.variant_id = u.variant_id AND s.location_id = u.location_id`,
      [rows.map((r) => r.variantId), rows.map((r) => r.locationId), rows.map((r) => r.delta)],
    );
    const audit = rows.map((r) => ({
      id: newId('adj'),
      seller_id: principal.sellerId,
      variant_id: r.variantId,
      location_id: r.locationId,
      external_sku: r.sku,
      delta: r.delta,
      level_after: levels.get(`${r.variantId}/${r.locationId}`)! + r.delta,
      reason: input.reason,
      category: input.category,
      unit_value: input.unit_value ?? null,
      api_key_id: principal.keyId,
    }));
    await trx('stock_adjustments').insert(audit);
    const totals = await trx.raw(
      `SELECT variant_id, COALESCE(SUM(ROUND(level)), 0)::bigint AS stocked FROM stock_levels
        WHERE variant_id = ANY(?) GROUP BY variant_id`,
      [rows.map((r) => r.variantId)],
    );
    const stocked = new Map<string, number>(
      totals.rows.map((t: { variant_id: string; stocked: number }) => [t.variant_id, Number(t.stocked)]),
    );
    return rows.map((r, i) => ({
      adjustment_id: audit[i].id,
      external_sku: r.sku,
      variant_id: r.variantId,
      location_id: r.locationId,
      delta: r.delta,
      stocked_quantity: stocked.get(r.variantId) ?? 0,
    }));
  });
  await bookkeeping(db, principal.sellerId, input, rows, out);
  return out;
}

/** Posts outside-sale revenue, cost of goods and damage write-offs; best-effort, never fails the adjustment. */
async function bookkeeping(
  db: Db,
  sellerId: string,
  input: AdjustmentIn,
  rows: Resolved[],
  out: AdjustmentRowOut[],
): Promise<void> {
  const entries = rows.flatMap((r, i) => {
    if (r.delta >= 0) return [];
    const units = -r.delta;
    const base = {
      seller_id: sellerId,
      external_sku: r.sku,
      variant_id: r.variantId,
      adjustment_id: out[i].adjustment_id,
    };
    if (input.category === 'external_sale' && input.unit_value != null) {
      return [
        { ...base, kind: 'external_sale_revenue', amount: ledgerAmount(units, input.unit_value)! },
        ...(r.unitCost !== null
          ? [{ ...base, kind: 'external_sale_cogs', amount: ledgerAmount(units, r.unitCost)! }]
          : []),
      ];
    }
    if (input.category === 'damaged' && r.unitCost !== null) {
      return [{ ...base, kind: 'damaged_write_off', amount: ledgerAmount(units, r.unitCost)! }];
    }
    return [];
  });
  if (entries.length === 0) return;
  try {
    await db('seller_ledger_entries').insert(entries).onConflict(['adjustment_id', 'kind']).ignore();
  } catch (err) {
    log.error('seller ledger posting failed', {
      seller_id: sellerId,
      error: err,
    });
  }
}
