import type { Settings } from '../config';
import { createDemoUser } from '../console/accounts';
import { totpCode } from '../console/totp';
import type { Db } from '../db/knex';
import { partnerScopes } from '../keys/scopes';
import { createCheckoutKey } from './checkout-keys';
import { createMerchant } from './merchants';
import { createPartnerKey } from './partner-keys';
import { createProduct, ProductIn } from './products';
import { createSeller } from './sellers';
import { setStockLevel } from './stock';
import { randomString } from '../lib/ids';
import { webhookRuntime } from '../webhooks/runtime';

const TEMPORAL_UI_URL = 'http://localhost:8233';
const DEMO_STOCK_LEVEL = 25;

/** The demo seller's products: a reviewed product with sizes, a draft, and a catalog product. */
const demoProducts: Array<Omit<ProductIn, 'sellerId'>> = [
  {
    title: 'Demo Cotton T-Shirt',
    status: 'published',
    catalogManaged: false,
    description: 'A plain cotton t-shirt.',
    variants: [
      { sku: 'DEMO-TSHIRT-S', price: 15000, options: { Size: 'S' } },
      { sku: 'DEMO-TSHIRT-M', price: 15000, options: { Size: 'M' } },
      { sku: 'DEMO-TSHIRT-L', price: 16000, options: { Size: 'L' } },
    ],
  },
  {
    title: 'Demo Ceramic Mug',
    status: 'draft',
    catalogManaged: false,
    variants: [{ sku: 'DEMO-MUG', price: 8000 }],
  },
  {
    title: 'Demo Phone Charger',
    status: 'published',
    catalogManaged: true,
    variants: [{ sku: 'DEMO-CHARGER', price: 25000 }],
  },
];

export interface DemoConsoleUser {
  email: string;
  password: string;
  totp_secret: string;
  /** The code valid when the demo was made (to try at once; then read the app's). */
  totp_code_now: string;
}

export interface DemoOut {
  seller_id: string;
  location_id: string;
  partner_key: string;
  partner_key_id: string;
  products: Array<{ product_id: string; title: string; status: string; skus: string[] }>;
  merchant_id: string;
  secret_key: string;
  publishable_key: string;
  /** One console owner per demo account; the TOTP secret goes into an authenticator app. */
  console: {
    url: string;
    seller_owner: DemoConsoleUser;
    merchant_owner: DemoConsoleUser;
  };
  urls: {
    api_base: string;
    partner_health: string;
    partner_products: string;
    checkout_payment_methods: string;
    temporal_ui: string;
  };
}

/**
 * Creates a fresh demo world in one transaction: a seller with one location, a sandbox (test)
 * Partner key with every scope, a few stocked products, the test merchant "Demo Store" with the
 * test and cash-on-delivery methods, and its test secret and publishable keys, and a console owner
 * for the seller and one for the merchant (password and TOTP secret). Keys are shown once.
 */
export async function createDemo(
  db: Db,
  settings: Pick<
    Settings,
    'PUBLIC_BASE_URL' | 'WEBHOOK_ALLOWED_HOSTS' | 'WEBHOOK_SECRET_KEY' | 'WEBHOOK_EXTRA_CA_PATH'
  >,
): Promise<DemoOut> {
  const base = settings.PUBLIC_BASE_URL.replace(/\/+$/, '');
  const { cipher } = webhookRuntime(settings);
  return db.transaction(async (trx) => {
    const seller = await createSeller(trx, { name: 'Demo Seller', locations: 1 });
    const locationId = seller.locations[0].id;
    const partnerKey = await createPartnerKey(trx, {
      sellerId: seller.seller_id,
      env: 'test',
      scopes: [...partnerScopes],
    });
    const products = [];
    for (const p of demoProducts) {
      const product = await createProduct(trx, { ...p, sellerId: seller.seller_id });
      for (const v of product.variants) {
        await setStockLevel(trx, { sellerId: seller.seller_id, sku: v.sku, locationId, level: DEMO_STOCK_LEVEL });
      }
      products.push({
        product_id: product.product_id,
        title: product.title,
        status: product.status,
        skus: product.variants.map((v) => v.sku),
      });
    }
    const merchant = await createMerchant(trx, {
      name: 'Demo Store',
      returnHosts: ['localhost', 'example.com', '*.example.com'],
      methods: ['test', 'cashondelivery'],
      testMerchant: true,
    });
    const secret = await createCheckoutKey(trx, { merchantId: merchant.merchant_id, mode: 'test', type: 'secret' });
    const publishable = await createCheckoutKey(trx, {
      merchantId: merchant.merchant_id,
      mode: 'test',
      type: 'publishable',
    });
    const now = new Date();
    const owner = async (tenant: { sellerId: string } | { merchantId: string }, who: string) => {
      const password = randomString(16);
      const email = `${who}-${randomString(6, 'abcdefghijkmnpqrstuvwxyz23456789')}@demo.example.com`;
      const made = await createDemoUser(trx, cipher, { ...tenant, email, role: 'owner', password, now });
      return { email, password, totp_secret: made.totpSecret, totp_code_now: totpCode(made.totpSecret, now) };
    };
    const sellerOwner = await owner({ sellerId: seller.seller_id }, 'seller');
    const merchantOwner = await owner({ merchantId: merchant.merchant_id }, 'merchant');
    return {
      seller_id: seller.seller_id,
      location_id: locationId,
      partner_key: partnerKey.key,
      partner_key_id: partnerKey.key_id,
      products,
      merchant_id: merchant.merchant_id,
      secret_key: secret.key,
      publishable_key: publishable.key,
      console: { url: `${base}/console/sign-in`, seller_owner: sellerOwner, merchant_owner: merchantOwner },
      urls: {
        api_base: base,
        partner_health: `${base}/partner/v1/health`,
        partner_products: `${base}/partner/v1/products`,
        checkout_payment_methods: `${base}/v1/payment_methods`,
        temporal_ui: TEMPORAL_UI_URL,
      },
    };
  });
}
