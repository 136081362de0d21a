import type { Db } from '../db/knex';
import type { KeyMode } from '../keys/keys';
import { findMethod } from '../checkout/methods';
import { OpsError } from './errors';

export interface MerchantMethodOut {
  merchant_id: string;
  mode: KeyMode;
  code: string;
  enabled: boolean;
}

/** Enables or disables one payment method for a merchant in one mode; a test-only method cannot be enabled live. */
export async function setMerchantMethod(
  db: Db,
  input: { merchantId: string; mode: KeyMode; code: string; enabled: boolean },
): Promise<MerchantMethodOut> {
  const method = findMethod(input.code);
  if (!method) throw new OpsError('unknown_method', `unknown payment method ${input.code}`);
  if (method.testOnly && input.mode === 'live' && input.enabled) {
    throw new OpsError('method_not_allowed', `${input.code} is a test-mode method and cannot be enabled in live mode`);
  }
  const merchant = await db('merchants').where({ id: input.merchantId }).first('id');
  if (!merchant) throw new OpsError('merchant_not_found', `no merchant ${input.merchantId}`);
  const [row] = await db('merchant_methods')
    .insert({ merchant_id: merchant.id, mode: input.mode, code: method.code, enabled: input.enabled })
    .onConflict(['merchant_id', 'mode', 'code'])
    .merge({ enabled: input.enabled, updated_at: db.fn.now() })
    .returning(['merchant_id', 'mode', 'code', 'enabled']);
  return row;
}
