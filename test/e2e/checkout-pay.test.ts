import type { Browser } from 'playwright-core';
import { buildMerchant } from '../helpers/factories';
import { createSession, payableBody } from '../helpers/checkout-payments';
import { startStack, Stack } from '../helpers/stack';
import { launchBrowser, newShopper, screenshots, serveMerchantSite } from './browser';

jest.setTimeout(120_000);

let stack: Stack;
let browser: Browser;
let m: Awaited<ReturnType<typeof buildMerchant>>;
beforeAll(async () => {
  [stack, browser] = await Promise.all([startStack(), launchBrowser()]);
  m = await buildMerchant(stack.db);
});
afterAll(async () => {
  await browser?.close();
  await stack?.stop();
});

it('a shopper pays with the test method and lands on the merchant success URL', async () => {
  const s = await createSession(stack, m.secretKey, payableBody({ amount: 25000, locale: 'en' }));
  const context = await newShopper(browser);
  await serveMerchantSite(context);
  const page = await context.newPage();
  await page.goto(s.url);
  await screenshots(page, 'checkout-en');
  await page.getByRole('button', { name: /Pay/ }).click();
  await page.waitForURL(/\/t\//);
  await screenshots(page, 'test-gateway');
  await page.getByRole('button', { name: 'Succeed' }).click();
  await page.waitForURL(/shop\.example\.com/);
  const url = new URL(page.url());
  expect(url.searchParams.get('session_id')).toBe(s.id);
  expect(url.searchParams.get('reference_id')).toBe(s.reference_id);
  await context.close();
});
