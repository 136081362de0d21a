import type { Browser, BrowserContext, Page } from 'playwright-core';
import { attemptSchedule } from '../../src/temporal/session-schedule';
import { historyOf, shopper, until } from '../helpers/checkout-payments';
import { startStack, Stack } from '../helpers/stack';
import { launchBrowser, newShopper, screenshots } from './browser';
import { buildShop, landedAtMerchant, openSession, orderBody, stubOutside } from './shop';

/**
 * Paying on the hosted page in headless Chromium: the test method to the merchant's success URL,
 * a decline and a retry, the slow button and the 30-second path (time skipped on the Temporal
 * test server while the return page polls), the return page in another browser, and the test
 * gateway page refusing an attempt that is not a test-gateway attempt.
 */
jest.setTimeout(120_000);

let stack: Stack;
let browser: Browser;
let shop: Awaited<ReturnType<typeof buildShop>>;
let context: BrowserContext;
let page: Page;

beforeAll(async () => {
  browser = await launchBrowser(); // first: without Chromium, fail before starting anything
  stack = await startStack();
  shop = await buildShop(stack);
});
afterAll(async () => {
  await browser?.close();
  await stack?.stop();
});
beforeEach(async () => {
  context = await newShopper(browser);
  await stubOutside(context);
  page = await context.newPage();
});
afterEach(() => context?.close());

/** An order the shopper can pay at once (no phone, name or address asked), in English. */
const payable = (over: Record<string, unknown> = {}) =>
  openSession(
    stack,
    shop.secretKey,
    orderBody({ collect: { phone: 'none', name: 'optional', shipping_address: 'none' }, locale: 'en', ...over }),
  );

/** Waits until the session workflow sits on a timer of `ms` (so skipping time now fires it). */
async function untilWorkflowWaits(sessionId: string, ms: number) {
  const timer = `timer ${ms / 1000} s`;
  await until(async () => (await historyOf(stack, sessionId)).at(-1)?.startsWith(timer) ?? false, timer);
}

const attemptIdOf = (url: string) => /\/[tr]\/(pa_[A-Za-z0-9_]+)/.exec(url)![1];

async function toTestGateway(p: Page, url: string): Promise<string> {
  await p.goto(url);
  await p.getByRole('radio', { name: 'Test gateway' }).check();
  await p.getByRole('button', { name: 'Pay 27,000 IQD' }).click();
  await p.waitForURL(/\/t\/pa_test_/);
  return attemptIdOf(p.url());
}

it('pays with the test method and lands on the merchant success URL with session_id and reference_id', async () => {
  const s = await payable();
  await page.goto(s.url);
  expect(await page.locator('#total-amount').textContent()).toBe('27,000 IQD');
  await screenshots(page, 'checkout-en');

  await page.getByRole('button', { name: 'Pay 27,000 IQD' }).click();
  await page.waitForURL(/\/t\/pa_test_/);
  expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Test payment gateway');
  await screenshots(page, 'test-gateway');
  await page.getByRole('button', { name: 'Succeed' }).click();

  const landed = await landedAtMerchant(page, '/done');
  expect(landed.searchParams.get('order')).toBe('7');
  expect(landed.searchParams.get('session_id')).toBe(s.id);
  expect(landed.searchParams.get('reference_id')).toBe(s.reference_id);
  const session = await stack.db('checkout_sessions').where({ id: s.id }).first();
  expect([session.status, session.payment_status]).toEqual(['completed', 'paid']);

  // Opened again, the page says it is paid and leads back to the merchant.
  await page.goto(s.url);
  expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Payment received');
  const back = page.getByRole('link', { name: 'Return to Dar Al-Kutub' });
  expect(new URL((await back.getAttribute('href'))!).searchParams.get('session_id')).toBe(s.id);
});

it('shows a payment in progress when the shopper goes back from the provider, and checking its status completes it', async () => {
  const s = await payable();
  const attemptId = await toTestGateway(page, s.url);
  await page.goBack();
  await page.reload();
  expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Payment in progress');
  await screenshots(page, 'payment-in-progress');
  // Back without an answer from the provider: the return page asks to verify, the amount rule decides.
  await page.getByRole('link', { name: 'Check payment status' }).click();
  await page.waitForURL(`**/r/${attemptId}`);
  await landedAtMerchant(page, '/done');
});

it('explains a declined payment back on the checkout page, and the shopper retries and pays', async () => {
  const s = await payable();
  const first = await toTestGateway(page, s.url);
  await page.getByRole('button', { name: 'Fail' }).click();

  await page.waitForURL((url) => url.pathname === `/c/${s.code}` && url.searchParams.get('attempt') === first);
  const alert = page.getByRole('alert').filter({ hasText: 'Payment not completed' });
  expect(await alert.textContent()).toContain('Your payment was declined. No money was taken.');
  await screenshots(page, 'payment-failed');

  await page.getByRole('button', { name: 'Pay 27,000 IQD' }).click();
  await page.waitForURL(/\/t\/pa_test_/);
  expect(attemptIdOf(page.url())).not.toBe(first);
  await page.getByRole('button', { name: 'Succeed' }).click();
  const landed = await landedAtMerchant(page, '/done');
  expect(landed.searchParams.get('session_id')).toBe(s.id);
});

it('explains a payment cancelled at the provider', async () => {
  const s = await payable();
  await toTestGateway(page, s.url);
  await page.getByRole('button', { name: 'Cancel' }).click();
  await page.waitForURL((url) => url.pathname === `/c/${s.code}`);
  expect(await page.locator('#failure').textContent()).toContain('The payment was cancelled. No money was taken.');
  expect((await stack.db('checkout_sessions').where({ id: s.id }).first()).status).toBe('open');
});

it('shows progress through the slow button’s 90 seconds, here and in another browser, then both reach the merchant', async () => {
  const s = await payable();
  const attemptId = await toTestGateway(page, s.url);
  await page.getByRole('button', { name: 'Slow' }).click();
  await page.waitForURL(`**/r/${attemptId}`);
  expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Confirming your payment');
  expect(await page.getByRole('status').textContent()).toBe('Please keep this page open.');
  await screenshots(page, 'return-pending');

  // The return address carries no session code: a browser with nothing of this shopper's opens it.
  const other = await newShopper(browser);
  await stubOutside(other);
  const elsewhere = await other.newPage();
  await elsewhere.goto(`${stack.baseUrl}/r/${attemptId}`);
  expect(await elsewhere.getByRole('heading', { level: 1 }).textContent()).toBe('Confirming your payment');

  await untilWorkflowWaits(s.id, attemptSchedule.slowAnswerMs);
  await stack.env.sleep(attemptSchedule.slowAnswerMs);
  for (const p of [page, elsewhere]) {
    const landed = await landedAtMerchant(p, '/done');
    expect(landed.searchParams.get('reference_id')).toBe(s.reference_id);
  }
  await other.close();
});

it('verifies on return when no button was pressed, and waits out the 30-second path (amount ending 003)', async () => {
  const s = await payable({ amount: 27003 });
  await page.goto(s.url);
  await page.getByRole('button', { name: 'Pay 27,003 IQD' }).click();
  await page.waitForURL(/\/t\/pa_test_/);
  const attemptId = attemptIdOf(page.url());
  // The shopper comes back from the provider without an answer: the return page asks to verify.
  await page.goto(`${stack.baseUrl}/r/${attemptId}`);
  expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Confirming your payment');
  const attempt = await stack.db('payment_attempts').where({ id: attemptId }).first();
  expect(attempt.verify_requested_at).not.toBeNull();
  expect(attempt.status).toBe('pending');

  await untilWorkflowWaits(s.id, attemptSchedule.delayedSuccessMs);
  await stack.env.sleep(attemptSchedule.delayedSuccessMs);
  await landedAtMerchant(page, '/done');
});

it('refuses the test gateway page for an attempt that is not a test-gateway attempt', async () => {
  const s = await payable();
  const res = await shopper(stack, shop.publishableKey)('POST', `/sessions/${s.code}/attempts`, {
    body: { method: 'cashondelivery' },
  });
  expect(res.status).toBe(201);
  const response = await page.goto(`${stack.baseUrl}/t/${res.body.attempt_id}?lang=en`);
  expect(response?.status()).toBe(403);
  expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Not a test payment');
  expect(await page.getByRole('button', { name: 'Succeed' }).count()).toBe(0);
  await screenshots(page, 'test-gateway-refused');
});

it('answers an unknown attempt or session code with a not-found page', async () => {
  for (const path of ['/r/pa_test_nothing', '/t/pa_test_nothing', '/c/NOSUCHCODE1', '/c/lowercase']) {
    const response = await page.goto(`${stack.baseUrl}${path}?lang=en`);
    expect(response?.status()).toBe(404);
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Payment link not found');
  }
  await screenshots(page, 'not-found');
});
