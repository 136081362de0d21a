import type { Db } from '../../src/db/knex';
import type { KeyMode } from '../../src/keys/keys';
import { checkoutScopes, CheckoutScope, partnerScopes, PartnerScope } from '../../src/keys/scopes';
import { createCheckoutKey } from '../../src/ops/checkout-keys';
import { createMerchant, MerchantIn } from '../../src/ops/merchants';
import { createPartnerKey } from '../../src/ops/partner-keys';
import { createSeller } from '../../src/ops/sellers';

let counter = 0;
const unique = (label: string) => `${label} ${Date.now()}-${++counter}`;

/** A seller with one stock location and a sandbox key with every scope (or those given). */
export async function buildSeller(
  db: Db,
  opts: { locations?: number; env?: KeyMode; scopes?: PartnerScope[]; keyId?: string; secret?: string } = {},
) {
  const seller = await createSeller(db, { name: unique('Seller'), locations: opts.locations ?? 1 });
  const key = await createPartnerKey(db, {
    sellerId: seller.seller_id,
    env: opts.env ?? 'test',
    scopes: opts.scopes ?? [...partnerScopes],
    keyId: opts.keyId,
    secret: opts.secret,
  });
  return { ...seller, key: key.key, keyId: key.key_id };
}

/** A test merchant with `test` and `cashondelivery` enabled, and test-mode secret and publishable keys. */
export async function buildMerchant(
  db: Db,
  opts: Partial<MerchantIn> & { mode?: KeyMode; scopes?: CheckoutScope[] } = {},
) {
  const { merchant_id } = await createMerchant(db, {
    name: opts.name ?? unique('Merchant'),
    returnHosts: opts.returnHosts ?? ['shop.example.com', '*.example.org'],
    contactEmail: opts.contactEmail ?? 'ops@shop.example.com',
    methods: opts.methods ?? ['test', 'cashondelivery'],
    testMerchant: opts.testMerchant ?? true,
  });
  const mode = opts.mode ?? 'test';
  const secret = await createCheckoutKey(db, {
    merchantId: merchant_id,
    mode,
    type: 'secret',
    scopes: opts.scopes ?? [...checkoutScopes],
  });
  const publishable = await createCheckoutKey(db, { merchantId: merchant_id, mode, type: 'publishable' });
  return {
    merchantId: merchant_id,
    mode,
    secretKey: secret.key,
    secretKeyId: secret.key_id,
    publishableKey: publishable.key,
  };
}
