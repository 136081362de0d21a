import { Webhook } from 'standardwebhooks';
import { randomString } from '../../src/lib/ids';
import { DISABLE_AFTER_FAILING_MS } from '../../src/webhooks/schedule';
import { paidSession } from '../helpers/checkout-payments';
import { call } from '../helpers/http';
import type { ReceivedRequest } from '../helpers/https-receiver';
import { webhookSteps } from '../helpers/webhooks';
import { plain } from './browser';
import {
  acceptInvite,
  expectGoodPage,
  goTo,
  openTab,
  reauthenticate,
  openUntil,
  shoot,
  useConsoleEnv,
} from './console';

/**
 * The merchant's console in headless Chromium, in English and in Arabic (right to left): an owner
 * invited by the operator CLI adds a webhook endpoint pointing at a real HTTPS receiver that
 * answers 500; sees the failed deliveries with the receiver's body shown as text, and, after the
 * test-mode fast-forward runs out the endpoint's 3 days of failures, the endpoint disabled and
 * why; fixes the receiver, enables the endpoint, resends one event and recovers every other
 * failed one since a time (the receiver verifies each signature); then refunds part of a payment
 * (re-authenticated) and sees what is left. Every page is in the language and direction asked for
 * and passes axe.
 */
jest.setTimeout(300_000);

const env = useConsoleEnv();
const steps = webhookSteps(() => env.stack);

/** What the broken receiver answers: markup that must be shown as text, never rendered. */
const BROKEN_BODY = '<h1>Order service down</h1> (ref E-4711)';

/**
 * Standard Webhooks' check as a receiver makes it (a `v1` signature of id, timestamp and body by
 * the secret; a timestamp within 5 minutes), against the stack's clock: the tests move it ahead of
 * real time, so the library's own `verify` (which reads the real time) cannot be used.
 */
function signedWith(secret: string, r: ReceivedRequest, now: Date): boolean {
  const header = (name: string) => String(r.headers[name] ?? '');
  const sentAt = new Date(Number(header('webhook-timestamp')) * 1000);
  const expected = new Webhook(secret).sign(header('webhook-id'), sentAt, r.body);
  return (
    header('webhook-signature').split(' ').includes(expected) && Math.abs(now.getTime() - sentAt.getTime()) <= 300_000
  );
}

it.each(['en', 'ar'] as const)(
  'a merchant (%s) sees a failed delivery and why, fixes the receiver, resends and recovers, and refunds part of a payment',
  async (lang) => {
    const started = env.stack.clock();
    const merchant = await steps.webhookMerchant();
    const tab = await openTab(env, lang);
    const { page, t } = tab;
    const owner = await acceptInvite(env, tab, { merchantId: merchant.merchantId });
    expect(new URL(page.url()).pathname).toBe('/console/developers/webhooks');
    expect(await page.locator('#test-mode-banner').count()).toBe(1);

    // The receiver: down at first; once fixed, it takes only what the endpoint's secret signs.
    const path = `/orders-${lang}-${randomString(8)}`;
    let secret = '';
    let broken = true;
    const verified: string[] = [];
    env.receiver.respond = (r: ReceivedRequest) => {
      if (r.path !== path) return { status: 200 };
      if (broken) return { status: 500, body: BROKEN_BODY };
      if (!signedWith(secret, r, env.stack.clock())) return { status: 400, body: 'bad signature' };
      verified.push(JSON.parse(r.body).id);
      return { status: 200 };
    };

    // Developers › Webhooks: an endpoint for completed sessions; its signing secret shown once.
    const url = env.receiver.url(path);
    await page.getByLabel('URL', { exact: true }).fill(url);
    await page.getByLabel(t('description'), { exact: true }).fill('Order system');
    await page.getByLabel('checkout.session.completed', { exact: true }).check();
    await page.getByRole('button', { name: t('add_endpoint'), exact: true }).click();
    secret = (await page.locator('#new-secret-value').textContent())!;
    expect(secret).toMatch(/^whsec_/);
    await expectGoodPage(tab);

    // A shopper pays; the event fails at the receiver. The endpoint's page shows the body as text.
    const session = await paidSession(env.stack, merchant);
    await page.getByRole('link', { name: url, exact: true }).click();
    const endpointPage = page.url();
    const payment = JSON.parse((await env.receiver.waitFor(1, path))[0].body);
    expect([payment.type, payment.data.object.id]).toEqual(['checkout.session.completed', session.id]);
    const rowsOf = (eventId: string) => page.locator('tbody tr', { hasText: eventId });
    // The attempt's row, and the endpoint failing since then (recorded a moment later).
    await openUntil(
      page,
      endpointPage,
      async () =>
        (await rowsOf(payment.id).count()) > 0 && (await page.locator('#endpoint-state.notice-error').count()) > 0,
      'the failed delivery',
    );
    expect(await rowsOf(payment.id).first().locator('pre.response-body').textContent()).toBe(BROKEN_BODY);
    expect(await page.locator('pre.response-body h1').count()).toBe(0);
    await expectGoodPage(tab);

    // A test event from the page fails too.
    await page.locator('select[name="type"]').selectOption('checkout.session.completed');
    await page.getByRole('button', { name: t('send_test_event'), exact: true }).click();
    const sent = plain(await page.locator('.notice-ok').textContent());
    const testEvent = /evt_[A-Za-z0-9_]+/.exec(sent)![0];
    expect(sent).toBe(t('test_event_sent', { event: testEvent }));
    await openUntil(page, endpointPage, async () => (await rowsOf(testEvent).count()) > 0, 'the failed test event');

    // Three days of failures, skipped with the test-mode fast-forward: the retries due fail, and the
    // endpoint is disabled; the page says so and what to do.
    const forward = await call(
      env.stack.baseUrl,
      'POST',
      `/v1/test_helpers/webhook_endpoints/${endpointPage.split('/').pop()}/fast_forward`,
      {
        key: merchant.secretKey,
        body: { seconds: DISABLE_AFTER_FAILING_MS / 1000 },
      },
    );
    expect(forward.status).toBe(200);
    const disabled = t('endpoint_disabled_auto', { reason: 'delivery_failures' });
    await openUntil(
      page,
      endpointPage,
      async () => plain(await page.locator('#endpoint-state').textContent()) === disabled,
      'the disable',
    );
    expect(await page.locator('pre.response-body', { hasText: BROKEN_BODY }).count()).toBeGreaterThan(2);
    await expectGoodPage(tab);
    if (lang === 'en') await shoot(tab, 'endpoint-failed');

    // Fixed: enable the endpoint, resend the payment's event, then recover every other failed one.
    broken = false;
    await page.getByRole('button', { name: t('enable'), exact: true }).click();
    await page.getByText(t('endpoint_enable_done')).waitFor();
    await rowsOf(payment.id)
      .first()
      .getByRole('button', { name: t('resend'), exact: true })
      .click();
    expect(plain(await page.locator('.notice-ok').textContent())).toBe(
      t('resent_event', { event: payment.id, count: 1 }),
    );
    await openUntil(
      page,
      endpointPage,
      async () => (await page.locator('tr.delivery-delivered', { hasText: payment.id }).count()) > 0,
      'the resent event delivered',
    );
    expect(verified).toEqual([payment.id]);

    const since = new Date(started.getTime() - 3_600_000).toISOString();
    await page.getByLabel(t('recover_since'), { exact: true }).fill(since);
    await page.getByRole('button', { name: t('recover_failed'), exact: true }).click();
    // Only the test event was still undelivered.
    expect(plain(await page.locator('.notice-ok').textContent())).toBe(t('recover_queued', { count: 1, since }));
    await openUntil(
      page,
      endpointPage,
      async () => (await page.locator('tr.delivery-delivered', { hasText: testEvent }).count()) > 0,
      'the recovered event delivered',
    );
    expect(verified).toEqual([payment.id, testEvent]);
    expect(plain(await page.locator('#endpoint-state').textContent())).toBe(t('endpoint_healthy'));
    await expectGoodPage(tab);

    // Payments: the session; a partial refund, after password and code again (the sign-in was over
    // 5 minutes ago), and what is left.
    env.stack.clock.advance(6 * 60_000);
    await goTo(tab, 'nav_payments');
    await page.getByRole('link', { name: session.id, exact: true }).click();
    await expectGoodPage(tab);
    const amount = page.locator('input[name="amount"]');
    expect(await amount.inputValue()).toBe('10000');
    await amount.fill('4000');
    await page.getByRole('button', { name: t('refund_submit'), exact: true }).click();
    await reauthenticate(env, tab, owner);
    expect(new URL(page.url()).pathname).toBe(`/console/payments/${session.id}`);
    await amount.fill('4000');
    await page.getByLabel(t('reason_optional'), { exact: true }).fill('One lamp arrived broken');
    await page.getByRole('button', { name: t('refund_submit'), exact: true }).click();
    await page.locator('.notice-ok').waitFor();
    expect(await page.locator('#left-to-refund').textContent()).toBe('6000 IQD');
    expect(await amount.inputValue()).toBe('6000');
    const refunds = page.locator('tbody tr[id^="refund-"]');
    expect(await refunds.count()).toBe(1);
    expect(await refunds.first().textContent()).toContain('One lamp arrived broken');
    await expectGoodPage(tab);
    await shoot(tab, 'payment', [lang === 'ar' ? 'phone' : 'desktop']);

    expect(tab.problems).toEqual([]);
    await tab.context.close();
  },
);
