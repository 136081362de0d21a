import type { Browser, BrowserContext, Page } from 'playwright-core';
import { setMerchantBranding } from '../../src/ops/merchants';
import { buildMerchant } from '../helpers/factories';
import { createSession, sessionBody } from '../helpers/checkout-payments';
import { startStack, type Stack } from '../helpers/stack';
import { launchBrowser, newShopper } from './browser';

/** The merchant's logo, served by the test at an https address (the page loads only https images). */
export const LOGO_URL = 'https://cdn.example.com/logo.svg';
const LOGO_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 40 40"><rect width="40" height="40" rx="8" fill="#7c2d12"/>' +
  '<path d="M11 12h8a4 4 0 0 1 4 4v13a3 3 0 0 0-3-3h-9zM29 12h-3a3 3 0 0 0-3 3v14a3 3 0 0 1 3-3h3z" fill="#fed7aa"/></svg>';

/** A test merchant with a display name, logo and accent colour (as the operator would set them). */
export async function buildShop(stack: Stack, opts: { methods?: string[]; accent?: string } = {}) {
  const m = await buildMerchant(stack.db, { name: 'Dar Al-Kutub', methods: opts.methods });
  await setMerchantBranding(stack.db, m.merchantId, { logoUrl: LOGO_URL, accent: opts.accent ?? '#9a3412' });
  return m;
}

/** A bookshop's order: two books, a discount and delivery, netting to `amount` (IQD by default). */
export function orderBody(over: Record<string, unknown> = {}) {
  const amount = (over.amount as number | undefined) ?? 27000;
  return sessionBody({
    line_items: [
      { label: 'The Thousand and One Nights', amount: 12000, quantity: 2, type: 'charge' },
      { label: 'Bookmark gift', amount: 2000, type: 'discount' },
      { label: 'Delivery in Baghdad', amount: 5000, type: 'shipping' },
      { label: 'Gift wrapping', amount: amount - 27000, type: 'charge' },
    ].filter((i) => i.amount !== 0),
    amount,
    ...over,
  });
}

/** Creates a session as the merchant's server would. */
export const openSession = (stack: Stack, secretKey: string, body: Record<string, unknown>) =>
  createSession(stack, secretKey, body);

/**
 * The outside world of a shopper's browser: the merchant's site (success and cancel URLs) and the
 * logo host, both answered here, so no request leaves the machine.
 */
export async function stubOutside(context: BrowserContext): Promise<void> {
  await context.route('https://shop.example.com/**', (route) =>
    route.fulfill({
      status: 200,
      contentType: 'text/html; charset=utf-8',
      body: '<!doctype html><title>Dar Al-Kutub</title><h1>Back at the shop</h1>',
    }),
  );
  await context.route(LOGO_URL, (route) =>
    route.fulfill({ status: 200, contentType: 'image/svg+xml', body: LOGO_SVG }),
  );
}

/** Waits until the browser has gone to the merchant's site, and returns that address. */
export async function landedAtMerchant(page: Page, path: string): Promise<URL> {
  await page.waitForURL((url) => url.host === 'shop.example.com' && url.pathname === path);
  return new URL(page.url());
}

export interface ShopperWorld {
  stack: Stack;
  browser: Browser;
  shop: Awaited<ReturnType<typeof buildShop>>;
  /** A fresh shopper (cookies and all) for each test, with outside sites stubbed. */
  context: BrowserContext;
  page: Page;
}

/**
 * Registers the hooks every browser test file needs and returns what they set: the browser first
 * (so a missing Chromium fails before anything starts), then the stack and the shop, once per
 * file; a new shopper and page for each test.
 */
export function useShopperWorld(shopOpts: Parameters<typeof buildShop>[1] = {}): ShopperWorld {
  const world = {} as ShopperWorld;
  beforeAll(async () => {
    world.browser = await launchBrowser();
    world.stack = await startStack();
    world.shop = await buildShop(world.stack, shopOpts);
  });
  afterAll(async () => {
    await world.browser?.close();
    await world.stack?.stop();
  });
  beforeEach(async () => {
    world.context = await newShopper(world.browser);
    await stubOutside(world.context);
    world.page = await world.context.newPage();
  });
  afterEach(() => world.context?.close());
  return world;
}
