import { createSeller } from '../../src/ops/sellers';
import { call } from '../helpers/http';
import { ops, partnerClient, uniqueSku } from '../helpers/partner';
import { plain } from './browser';
import {
  acceptInvite,
  addPasskey,
  expectGoodPage,
  goTo,
  openTab,
  shoot,
  signIn,
  signOut,
  useConsoleEnv,
} from './console';

/**
 * The seller's console in headless Chromium, in English and in Arabic (right to left), as the
 * Partner contract's "seller dashboard": an owner invited by the operator CLI sets up the account
 * (password and TOTP), adds a passkey and signs in with it; creates a Partner key and uses it on
 * the Partner API; submits a product for review; accepts and ships an order that the Partner API
 * then shows as shipped. Every page is in the language and direction asked for and passes axe.
 */
jest.setTimeout(300_000);

const env = useConsoleEnv();

it.each(['en', 'ar'] as const)(
  'a seller (%s) signs in with a passkey, makes a Partner key, submits a product and ships an order the Partner API shows shipped',
  async (lang) => {
    const seller = await createSeller(env.stack.db, { name: `Seller ${uniqueSku(lang)}`, locations: 1 });
    const tab = await openTab(env, lang, { authenticator: true });
    const { page, t } = tab;
    const owner = await acceptInvite(env, tab, { sellerId: seller.seller_id });

    // A passkey on Account › Security, then out and in again with it as the second factor.
    await addPasskey(tab, 'Laptop');
    await signOut(tab);
    await signIn(env, tab, owner, 'passkey', {
      onVerify: async () => {
        if (lang === 'en') await shoot(tab, 'verify-passkey', ['phone']);
      },
    });
    expect(await page.locator('.who').textContent()).toContain(owner.email);

    // Settings › Integrations: a key with three scopes, shown once.
    await goTo(tab, 'nav_integrations');
    const create = page.locator('form[action="/console/settings/integrations/keys"]');
    for (const scope of ['catalog:read', 'catalog:write', 'orders:read'])
      await create.getByLabel(scope, { exact: true }).check();
    await create.getByRole('button', { name: t('create_key') }).click();
    const key = (await page.locator('#new-key-value').textContent())!;
    expect(key).toMatch(/^svc_sk_test_/);
    await expectGoodPage(tab);

    // The key on the Partner API: a product, a draft until the seller submits it.
    const partner = partnerClient(env.stack.baseUrl, key);
    const sku = uniqueSku('LAMP');
    const bulk = await partner.bulkProducts({
      items: [{ external_sku: sku, title: `Desk lamp ${lang}`, price_iqd: 25000 }],
    });
    expect(bulk.status).toBe(200);
    expect((await partner.get(`/products/${sku}`)).body.status).toBe('draft');

    // Products: found by SKU, submitted for review.
    await goTo(tab, 'nav_products');
    await page.getByLabel(t('search_sku')).fill(sku);
    await page.getByRole('button', { name: t('search'), exact: true }).click();
    await page.getByRole('link', { name: `Desk lamp ${lang}` }).click();
    await expectGoodPage(tab);
    await page.getByRole('button', { name: t('submit_review'), exact: true }).click();
    await page.getByText(t('product_submitted')).waitFor();
    expect(await page.locator('#product-status').textContent()).toBe(t('pst_proposed'));
    expect((await partner.get(`/products/${sku}`)).body.status).toBe('proposed');

    // Orders: a shopper's order in the pending queue; accepted, then shipped with carrier and tracking number.
    const order = await ops(env.stack.db, 'order', 'create', '--seller', seller.seller_id, '--items', `${sku}:2`);
    await goTo(tab, 'nav_orders');
    await page.getByRole('link', { name: order.increment_id }).waitFor();
    await expectGoodPage(tab);
    await shoot(tab, 'orders', ['phone']);
    await page.getByRole('link', { name: order.increment_id }).click();
    await page.getByRole('button', { name: t('accept'), exact: true }).click();
    await page.getByText(t('order_accepted')).waitFor();
    await page.getByLabel(t('carrier')).fill('Aramex');
    await page.getByLabel(t('tracking')).fill('AX-778899');
    await page.getByRole('button', { name: t('ship'), exact: true }).click();
    await page.getByText(t('order_shipped')).waitFor();
    expect(plain(await page.locator('#order-status').textContent())).toBe(t('st_shipped'));
    await expectGoodPage(tab);
    if (lang === 'en') await shoot(tab, 'order-shipped');

    const shipped = await call(env.stack.baseUrl, 'GET', `/partner/v1/orders/${order.order_id}`, { key });
    expect([shipped.status, shipped.body.status, shipped.body.carrier, shipped.body.tracking_number]).toEqual([
      200,
      'shipped',
      'Aramex',
      'AX-778899',
    ]);
    expect(tab.problems).toEqual([]);
    await tab.context.close();
  },
);
