import type { Page } from 'playwright-core';
import { attemptSchedule } from '../../src/temporal/session';
import { historyOf, shopper, until } from '../helpers/checkout-payments';
import { newShopper, screenshots } from './browser';
import { landedAtMerchant, openSession, orderBody, stubOutside, useShopperWorld } from './shop';

/**
 * Paying on the hosted page in headless Chromium: the test method to the merchant's success URL,
 * a decline and a retry, the slow button and the 30-second path (time skipped on the Temporal
 * test server while the return page polls), the return page in another browser, and the test
 * gateway page refusing an attempt that is not a test-gateway attempt.
 */
jest.setTimeout(120_000);

const w = useShopperWorld();

/** An order the shopper can pay at once (no phone, name or address asked), in English. */
const payable = (over: Record<string, unknown> = {}) =>
  openSession(
    w.stack,
    w.shop.secretKey,
    orderBody({ collect: { phone: 'none', name: 'optional', shipping_address: 'none' }, locale: 'en', ...over }),
  );

/** Waits until the session workflow sits on a timer of `ms` (so skipping time now fires it). */
async function untilWorkflowWaits(sessionId: string, ms: number) {
  const timer = `timer ${ms / 1000} s`;
  await until(async () => (await historyOf(w.stack, sessionId)).at(-1)?.startsWith(timer) ?? false, timer);
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
  await w.page.goto(s.url);
  expect(await w.page.locator('#total-amount').textContent()).toBe('27,000 IQD');
  await screenshots(w.page, 'checkout-en');

  await w.page.getByRole('button', { name: 'Pay 27,000 IQD' }).click();
  await w.page.waitForURL(/\/t\/pa_test_/);
  expect(await w.page.getByRole('heading', { level: 1 }).textContent()).toBe('Test payment gateway');
  await screenshots(w.page, 'test-gateway');
  await w.page.getByRole('button', { name: 'Succeed' }).click();

  const landed = await landedAtMerchant(w.page, '/done');
  expect(landed.searchParams.get('order')).toBe('7');
  expect(landed.searchParams.get('session_id')).toBe(s.id);
  expect(landed.searchParams.get('reference_id')).toBe(s.reference_id);
  const session = await w.stack.db('checkout_sessions').where({ id: s.id }).first();
  expect([session.status, session.payment_status]).toEqual(['completed', 'paid']);

  // Opened again, the page says it is paid and leads back to the merchant.
  await w.page.goto(s.url);
  expect(await w.page.getByRole('heading', { level: 1 }).textContent()).toBe('Payment received');
  const back = w.page.getByRole('link', { name: 'Return to Dar Al-Kutub' });
  expect(new URL((await back.getAttribute('href'))!).searchParams.get('session_id')).toBe(s.id);
});

it('shows a payment in progress when the shopper goes back from the provider, and checking its status completes it', async () => {
  const s = await payable();
  const attemptId = await toTestGateway(w.page, s.url);
  await w.page.goBack();
  await w.page.reload();
  expect(await w.page.getByRole('heading', { level: 1 }).textContent()).toBe('Payment in progress');
  await screenshots(w.page, 'payment-in-progress');
  // Back without an answer from the provider: the return page asks to verify, the amount rule decides.
  await w.page.getByRole('link', { name: 'Check payment status' }).click();
  await w.page.waitForURL(`**/r/${attemptId}`);
  await landedAtMerchant(w.page, '/done');
});

it('explains a declined payment back on the checkout page, and the shopper retries and pays', async () => {
  const s = await payable();
  const first = await toTestGateway(w.page, s.url);
  await w.page.getByRole('button', { name: 'Fail' }).click();

  await w.page.waitForURL((url) => url.pathname === `/c/${s.code}` && url.searchParams.get('attempt') === first);
  const alert = w.page.getByRole('alert').filter({ hasText: 'Payment not completed' });
  expect(await alert.textContent()).toContain('Your payment was declined. No money was taken.');
  await screenshots(w.page, 'payment-failed');

  await w.page.getByRole('button', { name: 'Pay 27,000 IQD' }).click();
  await w.page.waitForURL(/\/t\/pa_test_/);
  expect(attemptIdOf(w.page.url())).not.toBe(first);
  await w.page.getByRole('button', { name: 'Succeed' }).click();
  const landed = await landedAtMerchant(w.page, '/done');
  expect(landed.searchParams.get('session_id')).toBe(s.id);
});

it('explains a payment cancelled at the provider', async () => {
  const s = await payable();
  await toTestGateway(w.page, s.url);
  await w.page.getByRole('button', { name: 'Cancel' }).click();
  await w.page.waitForURL((url) => url.pathname === `/c/${s.code}`);
  expect(await w.page.locator('#failure').textContent()).toContain('The payment was cancelled. No money was taken.');
  expect((await w.stack.db('checkout_sessions').where({ id: s.id }).first()).status).toBe('open');
});

it('shows progress through the slow button’s 90 seconds, here and in another browser, then both reach the merchant', async () => {
  const s = await payable();
  const attemptId = await toTestGateway(w.page, s.url);
  await w.page.getByRole('button', { name: 'Slow' }).click();
  await w.page.waitForURL(`**/r/${attemptId}`);
  expect(await w.page.getByRole('heading', { level: 1 }).textContent()).toBe('Confirming your payment');
  expect(await w.page.getByRole('status').textContent()).toBe('Please keep this page open.');
  await screenshots(w.page, 'return-pending');

  // The return address carries no session code: a browser with nothing of this shopper's opens it.
  const other = await newShopper(w.browser);
  await stubOutside(other);
  const elsewhere = await other.newPage();
  await elsewhere.goto(`${w.stack.baseUrl}/r/${attemptId}`);
  expect(await elsewhere.getByRole('heading', { level: 1 }).textContent()).toBe('Confirming your payment');

  await untilWorkflowWaits(s.id, attemptSchedule.slowAnswerMs);
  await w.stack.env.sleep(attemptSchedule.slowAnswerMs);
  for (const p of [w.page, elsewhere]) {
    const landed = await landedAtMerchant(p, '/done');
    expect(landed.searchParams.get('reference_id')).toBe(s.reference_id);
  }
  await other.close();
});

it('verifies on return when no button was pressed, and waits out the 30-second path (amount ending 003)', async () => {
  const s = await payable({ amount: 27003 });
  await w.page.goto(s.url);
  await w.page.getByRole('button', { name: 'Pay 27,003 IQD' }).click();
  await w.page.waitForURL(/\/t\/pa_test_/);
  const attemptId = attemptIdOf(w.page.url());
  // The shopper comes back from the provider without an answer: the return page asks to verify.
  await w.page.goto(`${w.stack.baseUrl}/r/${attemptId}`);
  expect(await w.page.getByRole('heading', { level: 1 }).textContent()).toBe('Confirming your payment');
  const attempt = await w.stack.db('payment_attempts').where({ id: attemptId }).first();
  expect(attempt.verify_requested_at).not.toBeNull();
  expect(attempt.status).toBe('pending');

  await untilWorkflowWaits(s.id, attemptSchedule.delayedSuccessMs);
  await w.stack.env.sleep(attemptSchedule.delayedSuccessMs);
  await landedAtMerchant(w.page, '/done');
});

it('refuses the test gateway page for an attempt that is not a test-gateway attempt', async () => {
  const s = await payable();
  const res = await shopper(w.stack, w.shop.publishableKey)('POST', `/sessions/${s.code}/attempts`, {
    body: { method: 'cashondelivery' },
  });
  expect(res.status).toBe(201);
  const response = await w.page.goto(`${w.stack.baseUrl}/t/${res.body.attempt_id}?lang=en`);
  expect(response?.status()).toBe(403);
  expect(await w.page.getByRole('heading', { level: 1 }).textContent()).toBe('Not a test payment');
  expect(await w.page.getByRole('button', { name: 'Succeed' }).count()).toBe(0);
  await screenshots(w.page, 'test-gateway-refused');
});

it('answers an unknown attempt or session code with a not-found page', async () => {
  for (const path of ['/r/pa_test_nothing', '/t/pa_test_nothing', '/c/NOSUCHCODE1', '/c/lowercase']) {
    const response = await w.page.goto(`${w.stack.baseUrl}${path}?lang=en`);
    expect(response?.status()).toBe(404);
    expect(await w.page.getByRole('heading', { level: 1 }).textContent()).toBe('Payment link not found');
  }
  await screenshots(w.page, 'not-found');
});
