import type { Page } from 'playwright-core';
import { call } from '../helpers/http';
import { randomPhone, smsCode, until } from '../helpers/checkout-payments';
import { plain, screenshots } from './browser';
import { landedAtMerchant, openSession, orderBody, useShopperWorld } from './shop';

/**
 * The shopper's side of the hosted page in headless Chromium: verifying a phone by SMS code (the
 * test phone's hint, and a real number through the SMS outbox), name and address, cash on
 * delivery with its confirmation screen, cancelling (to cancel_url or the page's own screen) and
 * the expired screen.
 */
jest.setTimeout(120_000);

const w = useShopperWorld();

const order = (over: Record<string, unknown> = {}) =>
  openSession(w.stack, w.shop.secretKey, orderBody({ locale: 'en', ...over }));
const sessionRow = (id: string) => w.stack.db('checkout_sessions').where({ id }).first();

async function fillAddress(p: Page) {
  await p.getByLabel('Full name').fill('Zainab Ali');
  await p.getByLabel('Governorate').selectOption({ label: 'Baghdad' });
  await p.getByLabel('City or district').fill('Karrada');
  await p.getByLabel('Area, street and house').fill('Street 62, house 14');
  await p.getByLabel('Nearest landmark').fill('Near Al-Wathiq Square');
}

it('verifies the test phone with the code the test-mode hint shows, then pays by cash on delivery with name and address', async () => {
  const s = await order({ collect: { phone: 'required', name: 'required', shipping_address: 'required' } });
  await w.page.goto(s.url);
  const hint = plain(await w.page.locator('#test-hint').textContent());
  expect(hint).toContain('0770 000 0000');
  expect(hint).toContain('000000');

  // Paying first is refused until the phone is verified.
  await w.page.getByRole('radio', { name: 'Cash on delivery' }).check();
  await w.page.getByRole('button', { name: 'Confirm order' }).click();
  expect(await w.page.locator('#form-error').textContent()).toBe('Verify your phone number first.');

  await w.page.getByLabel('Mobile number').fill('0770 000 0000');
  await screenshots(w.page, 'otp-phone');
  await w.page.getByRole('button', { name: 'Send code' }).click();
  await w.page.getByLabel('Verification code').waitFor();
  expect(plain(await w.page.locator('#otp-help').textContent())).toContain('0770 000 0000');
  await screenshots(w.page, 'otp-code');
  let answer: any;
  await w.page.route('**/otp/verify', async (route) => {
    const response = await route.fetch();
    answer = await response.json();
    await route.fulfill({ response });
  });
  await w.page.getByLabel('Verification code').fill('000000');
  await w.page.locator('#phone-verified').waitFor();
  // The relay answers the page script without the customer token…
  expect(answer.customer_token).toBeUndefined();
  expect(answer.profile).toBeDefined();
  await w.page.locator('#phone-verified').waitFor();
  expect(plain(await w.page.locator('#phone-verified').textContent())).toBe('✓ Phone verified: 0770 000 0000');
  // …and keeps it in an HTTP-only cookie, out of reach of page scripts.
  const cookies = await w.context.cookies();
  const token = cookies.find((c) => c.name === `svc_ctok_${s.code}`);
  expect(token).toMatchObject({ httpOnly: true, sameSite: 'Lax' });
  expect(await w.page.evaluate('document.cookie')).not.toContain('ctok');

  await w.page.getByRole('radio', { name: 'Cash on delivery' }).check();
  await w.page.getByRole('button', { name: 'Confirm order' }).click();
  expect(await w.page.locator('#name-error').textContent()).toBe('This field is required.');
  expect(await w.page.getByLabel('Full name').getAttribute('aria-invalid')).toBe('true');
  await fillAddress(w.page);
  await screenshots(w.page, 'details');
  await w.page.getByRole('button', { name: 'Confirm order' }).click();

  await w.page.getByRole('heading', { name: 'Order confirmed' }).waitFor();
  expect(await w.page.locator('.screen-body').textContent()).toBe('Pay 27,000 IQD in cash when your order arrives.');
  await screenshots(w.page, 'cash-on-delivery-confirmed');
  const row = await sessionRow(s.id);
  expect([row.status, row.payment_status]).toEqual(['completed', 'requires_offline_collection']);
  expect(row.customer).toMatchObject({
    phone: '+9647700000000',
    phone_verified: true,
    name: 'Zainab Ali',
    address: {
      governorate: 'Baghdad',
      city: 'Karrada',
      line: 'Street 62, house 14',
      landmark: 'Near Al-Wathiq Square',
      country: 'IQ',
    },
  });

  await w.page.getByRole('link', { name: 'Return to Dar Al-Kutub' }).click();
  const landed = await landedAtMerchant(w.page, '/done');
  expect(landed.searchParams.get('session_id')).toBe(s.id);
  expect(landed.searchParams.get('reference_id')).toBe(s.reference_id);
});

it('verifies a real number with the SMS code, typed in Arabic-Indic digits, after a wrong code', async () => {
  const s = await order({ collect: { phone: 'required', name: 'none', shipping_address: 'none' } });
  const phone = randomPhone();
  await w.page.goto(s.url);
  // As an Iraqi shopper types it: local format, Arabic-Indic digits.
  const local = `0${phone.slice(4)}`.replace(/[0-9]/g, (d) => String.fromCharCode(0x0660 + Number(d)));
  await w.page.getByLabel('Mobile number').fill(local);
  await w.page.getByLabel('Mobile number').press('Enter');
  await w.page.getByLabel('Verification code').waitFor();
  let code: string | undefined;
  await until(async () => (code = await smsCode(w.stack.db, phone)) !== undefined, 'the SMS');

  const wrong = code === '123456' ? '654321' : '123456';
  await w.page.getByLabel('Verification code').fill(wrong);
  await w.page.locator('#otp-error').filter({ hasText: 'The code is wrong' }).waitFor();
  expect(await w.page.getByLabel('Verification code').getAttribute('aria-invalid')).toBe('true');

  await w.page
    .getByLabel('Verification code')
    .fill(code!.replace(/[0-9]/g, (d) => String.fromCharCode(0x0660 + Number(d))));
  await w.page.locator('#phone-verified').waitFor();
  expect((await sessionRow(s.id)).customer).toMatchObject({ phone, phone_verified: true });
});

it('pays by cash on delivery when nothing more is asked, with a confirmation screen', async () => {
  const s = await order({ collect: { phone: 'none', name: 'none', shipping_address: 'none' } });
  await w.page.goto(s.url);
  await w.page.getByRole('radio', { name: 'Cash on delivery' }).check();
  expect(await w.page.locator('#pay').textContent()).toContain('Confirm order');
  await w.page.getByRole('button', { name: 'Confirm order' }).click();
  await w.page.getByRole('heading', { name: 'Order confirmed' }).waitFor();
  expect((await sessionRow(s.id)).payment_status).toBe('requires_offline_collection');

  // Opened again later, the page still shows the confirmation, never the form.
  await w.page.goto(s.url);
  await w.page.getByRole('heading', { name: 'Order confirmed' }).waitFor();
  expect(await w.page.locator('#pay').count()).toBe(0);
});

it('cancels to the merchant cancel_url with nothing appended, after a confirmation', async () => {
  const s = await order();
  await w.page.goto(s.url);
  await w.page.getByRole('button', { name: 'Cancel and return to the store' }).click();
  await w.page.getByText('Cancel this payment? Your order will not be placed.').waitFor();
  await screenshots(w.page, 'cancel-confirm');
  await w.page.getByRole('button', { name: 'No, go back' }).click();
  expect((await sessionRow(s.id)).status).toBe('open');

  await w.page.getByRole('button', { name: 'Cancel and return to the store' }).click();
  await w.page.getByRole('button', { name: 'Yes, cancel' }).click();
  const landed = await landedAtMerchant(w.page, '/cart');
  expect(landed.search).toBe('');
  expect((await sessionRow(s.id)).status).toBe('canceled');

  const response = await w.page.goto(s.url);
  expect(response?.status()).toBe(410);
  await w.page.getByRole('heading', { name: 'Payment cancelled' }).waitFor();
});

it('cancels to the page’s own cancelled screen when the session has no cancel_url', async () => {
  const s = await order({ cancel_url: undefined });
  await w.page.goto(s.url);
  await w.page.getByRole('button', { name: 'Cancel payment' }).click();
  await w.page.getByRole('button', { name: 'Yes, cancel' }).click();
  await w.page.getByRole('heading', { name: 'Payment cancelled' }).waitFor();
  expect(await w.page.locator('.screen-body').textContent()).toBe('No payment was taken. You can close this page.');
  await screenshots(w.page, 'cancelled');
});

it('shows an expired session as a clear “expired” screen (410)', async () => {
  const s = await order();
  const expired = await call(w.stack.baseUrl, 'POST', `/v1/checkout/sessions/${s.id}/expire`, {
    key: w.shop.secretKey,
  });
  expect(expired.status).toBe(200);
  const response = await w.page.goto(s.url);
  expect(response?.status()).toBe(410);
  expect(await w.page.getByRole('heading', { level: 1 }).textContent()).toBe('This payment link has expired');
  expect(await w.page.locator('.screen-body').textContent()).toBe(
    'No payment was taken. Go back to the store to start again.',
  );
  await screenshots(w.page, 'expired');
});

it('sends a shopper whose session expired while on the page to the expired screen when they pay', async () => {
  const s = await order({ collect: { phone: 'none', name: 'none', shipping_address: 'none' } });
  await w.page.goto(s.url);
  await call(w.stack.baseUrl, 'POST', `/v1/checkout/sessions/${s.id}/expire`, { key: w.shop.secretKey });
  await w.page.getByRole('button', { name: 'Pay 27,000 IQD' }).click();
  await w.page.getByRole('heading', { name: 'This payment link has expired' }).waitFor();
});
