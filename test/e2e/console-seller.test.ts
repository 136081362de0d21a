import AxeBuilder from '@axe-core/playwright';
import type { Browser, Page } from 'playwright-core';
import { totpCode } from '../../src/console/totp';
import { buildSeller } from '../helpers/factories';
import { call } from '../helpers/http';
import { ops, partnerClient, uniqueSku } from '../helpers/partner';
import { startStack, type Stack } from '../helpers/stack';
import { launchBrowser, newShopper, screenshots } from './browser';

/**
 * The seller console in headless Chromium: an owner invited by the operator CLI sets up the
 * account (password and TOTP), signs out and in again with password and code, creates a Partner
 * key and uses it, ships an order that the Partner API then shows as shipped; the pages pass axe
 * with no serious or critical violation, and read right-to-left in Arabic.
 */
jest.setTimeout(120_000);

let stack: Stack;
let browser: Browser;
beforeAll(async () => {
  stack = await startStack();
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await stack?.stop();
});

/** No serious or critical axe violation on the page as it is now. */
async function expectAccessible(page: Page) {
  const { violations } = await new AxeBuilder({ page }).analyze();
  const bad = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  expect(bad.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`)).toEqual([]);
}

it('a seller sets up the console, signs in with password and TOTP, creates a key it uses on the Partner API, and ships an order', async () => {
  const seller = await buildSeller(stack.db);
  const sku = uniqueSku();
  await partnerClient(stack.baseUrl, seller.key).bulkProducts({
    items: [{ external_sku: sku, title: 'Desk lamp', price_iqd: 25000 }],
  });
  const order = await ops(stack.db, 'order', 'create', '--seller', seller.seller_id, '--items', `${sku}:2`);
  const email = `owner-${Date.now()}@shop.example`;
  const invite = await ops(
    stack.db,
    'console-user',
    'invite',
    '--seller',
    seller.seller_id,
    '--email',
    email,
    '--role',
    'owner',
  );
  const password = 'a long console password';

  const context = await newShopper(browser, { locale: 'en-US' });
  const page = await context.newPage();
  // The CLI prints the link on its own PUBLIC_BASE_URL; the test's server is on another port.
  await page.goto(stack.baseUrl + new URL(invite.link).pathname);
  await expectAccessible(page);
  const secret = (await page.locator('#totp-key').textContent())!;
  await page.getByLabel('New password (at least 12 characters)').fill(password);
  await page.getByLabel('Password again').fill(password);
  await page.getByLabel('Code').fill(totpCode(secret, stack.clock()));
  await page.getByRole('button', { name: 'Create account' }).click();
  await page.getByRole('heading', { name: 'Save your recovery codes' }).waitFor();
  expect(await page.locator('#recovery-codes li').count()).toBe(10);
  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name === '__Host-console_session')!;
  expect([session.secure, session.httpOnly, session.sameSite, session.path]).toEqual([true, true, 'Strict', '/']);

  // Out and in again: password, then a later code.
  await page.getByRole('link', { name: 'I saved them: go to the console' }).click();
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.waitForURL('**/console/sign-in');
  await expectAccessible(page);
  await page.getByLabel('E-mail').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Continue' }).click();
  await page.waitForURL('**/console/sign-in/verify');
  stack.clock.advance(30_000);
  await page.getByLabel('Code').fill(totpCode(secret, stack.clock()));
  await page.getByRole('button', { name: 'Verify' }).click();
  await page.waitForURL('**/console/orders');
  await expectAccessible(page);

  // Settings › Integrations: a key with two scopes, shown once, that the Partner API takes.
  await page.getByRole('link', { name: 'Integrations' }).click();
  const create = page.locator('form[action="/console/settings/integrations/keys"]');
  await create.getByLabel('orders:read').check();
  await create.getByLabel('catalog:read').check();
  await create.getByRole('button', { name: 'Create key' }).click();
  const key = (await page.locator('#new-key-value').textContent())!;
  expect(key).toMatch(/^svc_sk_test_/);
  await expectAccessible(page);
  await screenshots(page, 'console-integrations');
  const listed = await call(stack.baseUrl, 'GET', '/partner/v1/orders', { key });
  expect(listed.status).toBe(200);
  expect(listed.body.data.map((o: { order_id: string }) => o.order_id)).toContain(order.order_id);

  // Orders: accept, then ship with carrier and tracking number.
  await page.getByRole('link', { name: 'Orders' }).click();
  await page.getByRole('link', { name: order.increment_id }).click();
  await expectAccessible(page);
  await page.getByRole('button', { name: 'Accept' }).click();
  await page.getByText('Order accepted.').waitFor();
  await page.getByLabel('Carrier').fill('Aramex');
  await page.getByLabel('Tracking number').fill('AX-778899');
  await page.getByRole('button', { name: 'Ship' }).click();
  await page.getByText('Order shipped.').waitFor();
  expect(await page.locator('#order-status').textContent()).toBe('Shipped');
  await screenshots(page, 'console-order');

  const shipped = await call(stack.baseUrl, 'GET', `/partner/v1/orders/${order.order_id}`, { key });
  expect([shipped.body.status, shipped.body.carrier, shipped.body.tracking_number]).toEqual([
    'shipped',
    'Aramex',
    'AX-778899',
  ]);

  // The same pages in Arabic, right to left, and accessible.
  await page.goto(`${stack.baseUrl}/console/orders?status=shipped&lang=ar`);
  expect(await page.locator('html').getAttribute('dir')).toBe('rtl');
  expect(await page.locator('h1').textContent()).toBe('الطلبات');
  await expectAccessible(page);
  await page.goto(`${stack.baseUrl}/console/settings/integrations?lang=ku`);
  expect(await page.locator('html').getAttribute('lang')).toBe('ckb');
  await expectAccessible(page);
  await screenshots(page, 'console-integrations-ku');
  await context.close();
});
