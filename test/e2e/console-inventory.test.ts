import AxeBuilder from '@axe-core/playwright';
import type { Browser, Page } from 'playwright-core';
import { totpCode } from '../../src/console/totp';
import { consoleUser } from '../helpers/console';
import { buildSeller } from '../helpers/factories';
import { ops, partnerClient, uniqueSku } from '../helpers/partner';
import { startStack, type Stack } from '../helpers/stack';
import { launchBrowser, newShopper, PHONE, plain, screenshots } from './browser';

/**
 * The seller console's inventory and bulk order pages in headless Chromium at phone width: an
 * operator sets a SKU's stock, is refused a save over a value that moved meanwhile, records an
 * adjustment, and ships two orders at once in Arabic, right to left; every page passes axe with
 * no serious or critical violation and never scrolls sideways as a whole (wide tables scroll in
 * their own box).
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

/** No serious or critical axe violation, and no sideways scroll of the page at phone width. */
async function expectUsable(page: Page) {
  const { violations } = await new AxeBuilder({ page }).analyze();
  const bad = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  expect(bad.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`)).toEqual([]);
  const width = await page.evaluate('document.documentElement.scrollWidth');
  expect(width).toBeLessThanOrEqual(PHONE.width);
}

it('an operator sets stock, meets the stale-value guard, adjusts, and ships two orders at once in Arabic', async () => {
  const seller = await buildSeller(stack.db);
  const sku = uniqueSku('E2E');
  const partner = partnerClient(stack.baseUrl, seller.key);
  await partner.bulkProducts({ items: [{ external_sku: sku, title: 'Desk lamp', price_iqd: 25000 }] });
  await partner.bulkInventory({ items: [{ external_sku: sku, on_hand: 10 }] });
  const orders = [
    await ops(stack.db, 'order', 'create', '--seller', seller.seller_id, '--items', `${sku}:1`),
    await ops(stack.db, 'order', 'create', '--seller', seller.seller_id, '--items', `${sku}:1`),
  ];
  const user = await consoleUser(stack, { sellerId: seller.seller_id }, 'operator');

  const context = await newShopper(browser, { locale: 'en-US' });
  const page = await context.newPage();
  await page.goto(`${stack.baseUrl}/console/sign-in`);
  await page.getByLabel('E-mail').fill(user.email);
  await page.getByLabel('Password').fill(user.password);
  await page.getByRole('button', { name: 'Continue' }).click();
  await page.waitForURL('**/console/sign-in/verify');
  stack.clock.advance(30_000);
  await page.getByLabel('Code').fill(totpCode(user.totpSecret, stack.clock()));
  await page.getByRole('button', { name: 'Verify' }).click();
  await page.waitForURL('**/console/orders');

  // Inventory: the SKU's row, its stock set from the list.
  await page.getByRole('link', { name: 'Inventory' }).click();
  await expectUsable(page);
  await page.getByLabel(`New stock for ${sku}`).fill('7');
  await page.locator(`form[action$="/stock"]`).getByRole('button', { name: 'Save' }).click();
  await page.getByText(`Stock of ${sku} set from 10 to 7.`).waitFor();
  expect(await page.locator('#on-hand').textContent()).toBe('7');
  await expectUsable(page);

  // The seller's system moves it meanwhile: the save from this page is refused, with the value now.
  await partner.bulkInventory({ items: [{ external_sku: sku, on_hand: 12 }] });
  await page.getByLabel(`New stock for ${sku}`).fill('3');
  await page.getByRole('button', { name: 'Set stock' }).click();
  await page.getByText(`${sku} changed since you read it (7): it is 12 now.`).waitFor();
  expect(await page.locator('#on-hand').textContent()).toBe('12');

  // An adjustment, then the history.
  await page.getByLabel('Category').selectOption('damaged');
  await page.getByLabel('Change in units (negative to take away)').fill('-2');
  await page.getByLabel('Reason').fill('Dropped in the warehouse');
  await page.getByRole('button', { name: 'Record the adjustment' }).click();
  await page.getByText(`Adjustment recorded: -2 for ${sku}; 10 in stock now.`).waitFor();
  expect(await page.locator('#history + .table-wrap tbody tr').count()).toBe(1);
  await expectUsable(page);
  await screenshots(page, 'console-inventory-item');

  // Orders in Arabic: tick both, a tracking number each, one carrier, ship.
  await page.goto(`${stack.baseUrl}/console/orders?status=pending&lang=ar`);
  expect(await page.locator('html').getAttribute('dir')).toBe('rtl');
  await expectUsable(page);
  for (const [i, o] of orders.entries()) {
    // Values in right-to-left messages are bidi isolates (messages.ts).
    await page.getByLabel(`تحديد الطلب \u2068${o.increment_id}\u2069`).check();
    await page.getByLabel(`رقم تتبع الطلب \u2068${o.increment_id}\u2069`).fill(`AX-${i}`);
  }
  await page.getByLabel('شركة الشحن').fill('Aramex');
  await page.getByRole('button', { name: 'شحن المحدد' }).click();
  await page.locator('#bulk-results').waitFor();
  expect(plain(await page.locator('#bulk-results-section .notice').textContent())).toBe('نُفِّذ 2 من 2 من الطلبات.');
  await expectUsable(page);
  await screenshots(page, 'console-bulk-ar');
  for (const o of orders) {
    const row = await stack.db('orders').where({ id: o.order_id }).first('status', 'carrier');
    expect(row).toEqual({ status: 'shipped', carrier: 'Aramex' });
  }

  // The inventory list in Kurdish, right to left.
  await page.goto(`${stack.baseUrl}/console/inventory?lang=ku`);
  expect(await page.locator('html').getAttribute('lang')).toBe('ckb');
  await expectUsable(page);
  await screenshots(page, 'console-inventory-ku');
  await context.close();
});
