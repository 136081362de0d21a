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

export interface BrandingIn {
  displayName?: string;
  /** An https URL, or '' to remove the logo. */
  logoUrl?: string;
  /** `#RRGGBB`, or '' to use the page's default. */
  accent?: string;
}

/** Sets what the hosted page shows of the merchant: display name, logo and accent colour. */
export async function setMerchantBranding(
  db: Db,
  merchantId: string,
  input: BrandingIn,
): Promise<{ merchant_id: string; display_name: string; logo_url: string | null; accent: string | null }> {
  const changes: Record<string, string | null> = {};
  if (input.displayName !== undefined) {
    if (!input.displayName.trim()) throw new OpsError('invalid_display_name', 'display name must not be blank');
    changes.display_name = input.displayName.trim();
  }
  if (input.logoUrl !== undefined) {
    if (input.logoUrl !== '' && !isHttpsUrl(input.logoUrl)) {
      throw new OpsError('invalid_logo_url', 'logo URL must be an absolute https URL');
    }
    changes.logo_url = input.logoUrl || null;
  }
  if (input.accent !== undefined) {
    if (input.accent !== '' && !/^#[0-9a-fA-F]{6}$/.test(input.accent)) {
      throw new OpsError('invalid_accent', 'accent must be a colour like #9a3412');
    }
    changes.accent = input.accent ? input.accent.toLowerCase() : null;
  }
  if (Object.keys(changes).length === 0) {
    throw new OpsError('missing_flag', 'give at least one of --display-name, --logo-url, --accent');
  }
  const [row] = await db('merchants')
    .where({ id: merchantId })
    .update(changes)
    .returning(['id', 'display_name', 'logo_url', 'accent']);
  if (!row) throw new OpsError('merchant_not_found', `no merchant ${merchantId}`);
  return { merchant_id: row.id, display_name: row.display_name, logo_url: row.logo_url, accent: row.accent };
}

function isHttpsUrl(value: string): boolean {
  try {
    return new URL(value).protocol === 'https:';
  } catch {
    return false;
  }
}
