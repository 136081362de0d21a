import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { startStack, Stack } from '../helpers/stack';
import { DESKTOP, launchBrowser } from './browser';

/**
 * The reference page at /docs in headless Chromium: both APIs render from the served OpenAPI
 * documents, with every request to the service's own origin (nothing from a CDN) and no CSP
 * violation. Screenshots go to test/e2e/screenshots (README's copy is docs/screenshots).
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

const SCREENSHOTS = join(__dirname, 'screenshots');

async function open(path: string): Promise<{ page: Page; foreign: string[]; cspErrors: string[] }> {
  const page = await browser.newPage({ viewport: DESKTOP });
  const foreign: string[] = [];
  const cspErrors: string[] = [];
  page.on('request', (r) => {
    if (!r.url().startsWith(stack.baseUrl) && !r.url().startsWith('data:')) foreign.push(r.url());
  });
  page.on('console', (m) => {
    if (/Content Security Policy/i.test(m.text())) cspErrors.push(m.text());
  });
  await page.goto(stack.baseUrl + path);
  return { page, foreign, cspErrors };
}

it('renders the Checkout API from /v1/openapi.json, operations and headers included', async () => {
  const { page, foreign, cspErrors } = await open('/docs');
  await page.getByRole('heading', { name: 'Checkout API', level: 1 }).waitFor();
  await page.getByText('Create a session').first().click();
  await page.getByText('Idempotency-Key').first().waitFor();
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, 'api-reference-checkout-desktop.png') });
  expect(foreign).toEqual([]);
  expect(cspErrors).toEqual([]);
  await page.close();
});

it('renders the Seller Partner API from /partner/v1/openapi.json', async () => {
  const { page, foreign, cspErrors } = await open('/docs?api=partner');
  await page.getByRole('heading', { name: 'Seller Partner API', level: 1 }).waitFor();
  await page.getByText('Catalog', { exact: true }).first().click(); // only the first tag starts open
  await page.getByText('Create or update products by SKU').first().click();
  await page.getByText('Idempotency-Key').first().waitFor();
  await page.screenshot({ path: join(SCREENSHOTS, 'api-reference-partner-desktop.png') });
  expect(foreign).toEqual([]);
  expect(cspErrors).toEqual([]);
  await page.close();
});

it('serves the page with a same-origin Content-Security-Policy', async () => {
  const res = await fetch(`${stack.baseUrl}/docs`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
  expect(await res.text()).toContain('<script src="/docs/scalar.js"></script>');
});
