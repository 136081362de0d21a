import type { Db } from '../db/knex';
import type { KeyMode } from '../keys/keys';
import { methodCatalog, MethodDefinition } from './methods';

export interface MerchantMethod extends MethodDefinition {
  enabled: boolean;
}

/** The catalog as a merchant sees it in `mode`, in display order: test-only methods in test mode only. */
export function methodsForMode(mode: KeyMode, enabled: ReadonlyMap<string, boolean>): MerchantMethod[] {
  return methodCatalog
    .filter((m) => mode === 'test' || !m.testOnly)
    .map((m) => ({ ...m, enabled: enabled.get(m.code) ?? false }));
}

/** The methods a merchant may offer in `mode`, in display order, with `enabled` per the merchant's settings. */
export async function listMerchantMethods(db: Db, merchantId: string, mode: KeyMode): Promise<MerchantMethod[]> {
  const rows: Array<{ code: string; enabled: boolean }> = await db('merchant_methods')
    .where({ merchant_id: merchantId, mode })
    .select('code', 'enabled');
  return methodsForMode(mode, new Map(rows.map((r) => [r.code, r.enabled])));
}
