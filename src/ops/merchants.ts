import type { Db } from '../db/knex';
import { newId } from '../lib/ids';
import { findMethod } from '../checkout/methods';
import { OpsError } from './errors';

const HOST_PATTERN = /^(\*\.)?([a-z0-9]([a-z0-9-]*[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;

export interface MerchantIn {
  name: string;
  returnHosts: string[];
  contactEmail?: string;
  /** Enabled in both modes; `test` is enabled in test mode only. */
  methods?: string[];
  testMerchant?: boolean;
}

export interface MerchantOut {
  merchant_id: string;
  name: string;
  return_hosts: string[];
  methods: string[];
  test_merchant: boolean;
}

/** Creates a merchant with its return hosts and enabled methods. */
export async function createMerchant(db: Db, input: MerchantIn): Promise<MerchantOut> {
  if (!input.name.trim()) throw new OpsError('invalid_name', 'name must not be blank');
  const hosts = input.returnHosts.map((h) => h.trim().toLowerCase()).filter(Boolean);
  if (hosts.length === 0) throw new OpsError('invalid_return_hosts', 'at least one return host is required');
  for (const h of hosts) {
    if (!HOST_PATTERN.test(h)) throw new OpsError('invalid_return_hosts', `not a host name: ${h}`);
  }
  const methods = [...new Set(input.methods ?? [])];
  for (const code of methods) {
    if (!findMethod(code)) throw new OpsError('unknown_method', `unknown payment method ${code}`);
  }
  if (input.contactEmail !== undefined && !/^[^@\s]+@[^@\s]+$/.test(input.contactEmail)) {
    throw new OpsError('invalid_contact_email', 'contact email is not an e-mail address');
  }
  const merchantId = newId('mer');
  const returnHosts = [...new Set(hosts)];
  await db.transaction(async (trx) => {
    await trx('merchants').insert({
      id: merchantId,
      display_name: input.name.trim(),
      contact_email: input.contactEmail ?? null,
      test_merchant: input.testMerchant ?? false,
    });
    await trx('merchant_return_hosts').insert(returnHosts.map((host) => ({ merchant_id: merchantId, host })));
    const rows = methods.flatMap((code) =>
      (['test', 'live'] as const)
        .filter((mode) => code !== 'test' || mode === 'test')
        .map((mode) => ({ merchant_id: merchantId, mode, code, enabled: true })),
    );
    if (rows.length > 0) await trx('merchant_methods').insert(rows);
  });
  return {
    merchant_id: merchantId,
    name: input.name.trim(),
    return_hosts: returnHosts,
    methods,
    test_merchant: input.testMerchant ?? false,
  };
}

/** Suspends or restores a merchant; a suspended merchant's keys get `403 merchant_suspended`. */
export async function setMerchantSuspended(
  db: Db,
  merchantId: string,
  suspended: boolean,
): Promise<{ merchant_id: string; suspended: boolean }> {
  const n = await db('merchants').where({ id: merchantId }).update({ suspended });
  if (n === 0) throw new OpsError('merchant_not_found', `no merchant ${merchantId}`);
  return { merchant_id: merchantId, suspended };
}
