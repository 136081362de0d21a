import type { Db } from '../db/knex';
import { intInRange, money, nonBlank } from './checks';
import { findSellerVariant } from './lookups';

/** Sets the unit cost (cost of goods) of the seller's variant with `sku`. */
export async function setUnitCost(
  db: Db,
  input: { sellerId: string; sku: string; cost: number },
): Promise<{ variant_id: string; sku: string; unit_cost: number }> {
  const cost = money(input.cost, 'cost');
  const variant = await findSellerVariant(db, input.sellerId, input.sku);
  await db('variants').where({ id: variant.id }).update({ unit_cost: cost, updated_at: db.fn.now() });
  return { variant_id: variant.id, sku: variant.sku, unit_cost: cost };
}

export interface CampaignOut {
  variant_id: string;
  sku: string;
  price: number;
  sale_price: number | null;
  campaign_label: string | null;
  campaign_percent: number | null;
}

const campaignColumns = ['id', 'sku', 'price', 'sale_price', 'campaign_label', 'campaign_percent'];

function campaignOut(row: Record<string, unknown>): CampaignOut {
  return {
    variant_id: row.id as string,
    sku: row.sku as string,
    price: row.price as number,
    sale_price: row.sale_price as number | null,
    campaign_label: row.campaign_label as string | null,
    campaign_percent: row.campaign_percent as number | null,
  };
}

/**
 * Starts (or replaces) a markdown campaign: `sale_price = round(price * (100 - percent) / 100)`,
 * computed from the price in the same UPDATE so a concurrent price change cannot be missed.
 */
export async function startCampaign(
  db: Db,
  input: { sellerId: string; sku: string; percent: number; label: string },
): Promise<CampaignOut> {
  const percent = intInRange(input.percent, 'percent', 1, 99);
  const label = nonBlank(input.label, 'label');
  const variant = await findSellerVariant(db, input.sellerId, input.sku);
  const [row] = await db('variants')
    .where({ id: variant.id })
    .update({
      sale_price: db.raw('round(price * (100 - ?)::numeric / 100)', [percent]),
      campaign_percent: percent,
      campaign_label: label,
      updated_at: db.fn.now(),
    })
    .returning(campaignColumns);
  return campaignOut(row);
}

/** Ends the variant's markdown campaign, if any: the list price applies again. */
export async function endCampaign(db: Db, input: { sellerId: string; sku: string }): Promise<CampaignOut> {
  const variant = await findSellerVariant(db, input.sellerId, input.sku);
  const [row] = await db('variants')
    .where({ id: variant.id })
    .update({ sale_price: null, campaign_percent: null, campaign_label: null, updated_at: db.fn.now() })
    .returning(campaignColumns);
  return campaignOut(row);
}
