import type { Page } from 'playwright-core';
import { setMerchantSuspended } from '../../src/ops/merchants';
import { plain, screenshots } from './browser';
import { buildShop, landedAtMerchant, openSession, orderBody, useShopperWorld } from './shop';

/**
 * The hosted page in its three languages (Arabic and Kurdish right to left) with the language
 * switch, currency formatting, unavailable methods, escaping of the merchant's text, and what
 * makes it usable by everyone: labels, the keyboard, visible focus and a phone-width screen.
 */
jest.setTimeout(120_000);

const w = useShopperWorld({ methods: ['test', 'cashondelivery', 'card', 'zaincash'] });

const quick = { collect: { phone: 'none', name: 'optional', shipping_address: 'none' } };
const order = (over: Record<string, unknown> = {}) => openSession(w.stack, w.shop.secretKey, orderBody(over));
const htmlAttrs = (p: Page) =>
  p.evaluate('({ lang: document.documentElement.lang, dir: document.documentElement.dir })') as Promise<{
    lang: string;
    dir: string;
  }>;
const h1 = async (p: Page) => plain(await p.getByRole('heading', { level: 1 }).textContent());

it('shows the Arabic page right to left (the default locale) and the shopper pays on it', async () => {
  const s = await order({ ...quick, locale: undefined });
  await w.page.goto(s.url);
  expect(await htmlAttrs(w.page)).toEqual({ lang: 'ar', dir: 'rtl' });
  expect(await h1(w.page)).toBe('الدفع');
  expect(plain(await w.page.locator('#total-amount').textContent())).toBe('27,000 د.ع');
  expect(await w.page.locator('.item-discount .item-amount').textContent()).toBe('\u2066−2,000\u2069 د.ع');
  // Right to left: the summary's amounts sit at the left edge, the labels at the right.
  const label = await w.page.locator('.item .item-label').first().boundingBox();
  const amount = await w.page.locator('.item .item-amount').first().boundingBox();
  expect(amount!.x).toBeLessThan(label!.x);
  await screenshots(w.page, 'checkout-ar');

  await w.page.getByRole('radio', { name: 'بوابة الاختبار' }).check();
  expect(plain(await w.page.locator('#pay').textContent())).toBe('ادفع 27,000 د.ع');
  await w.page.locator('#pay').click();
  await w.page.waitForURL(/\/t\/pa_test_/);
  expect(await htmlAttrs(w.page)).toEqual({ lang: 'ar', dir: 'rtl' });
  await screenshots(w.page, 'test-gateway-ar');
  await w.page.getByRole('button', { name: 'نجاح' }).click();
  await landedAtMerchant(w.page, '/done');
});

it('switches language with the switch, keeps the choice, and shows Kurdish right to left', async () => {
  const s = await order({ ...quick, locale: 'ar' });
  await w.page.goto(s.url);
  await w.page.getByRole('navigation', { name: 'اللغة' }).getByRole('link', { name: 'English' }).click();
  await w.page.waitForURL(/lang=en/);
  expect(await htmlAttrs(w.page)).toEqual({ lang: 'en', dir: 'ltr' });
  expect(await h1(w.page)).toBe('Checkout');
  expect(await w.page.getByRole('link', { name: 'English' }).getAttribute('aria-current')).toBe('true');

  // The choice is remembered on the next visit without the parameter.
  await w.page.goto(s.url);
  expect(await h1(w.page)).toBe('Checkout');

  await w.page.getByRole('link', { name: 'کوردی' }).click();
  await w.page.waitForURL(/lang=ku/);
  expect(await htmlAttrs(w.page)).toEqual({ lang: 'ckb', dir: 'rtl' });
  expect(await h1(w.page)).toBe('پارەدان');
  expect(plain(await w.page.locator('#total-amount').textContent())).toBe('27,000 دینار');
  expect(await w.page.getByRole('radio', { name: 'پارەدان لە کاتی گەیاندن' }).count()).toBe(1);
  await screenshots(w.page, 'checkout-ku');
});

it('takes the page language from the session locale', async () => {
  for (const [locale, expected] of [
    ['ku', { lang: 'ckb', dir: 'rtl' }],
    ['en', { lang: 'en', dir: 'ltr' }],
    ['ar', { lang: 'ar', dir: 'rtl' }],
  ] as const) {
    const s = await order({ ...quick, locale });
    await w.page.goto(s.url);
    expect(await htmlAttrs(w.page)).toEqual(expected);
  }
});

it('shows USD with cents, and methods that cannot take the payment disabled with their reason', async () => {
  const s = await order({
    ...quick,
    locale: 'en',
    currency: 'USD',
    amount: 1250,
    line_items: [{ label: 'E-book bundle', amount: 1250, type: 'charge' }],
    payment_method_types: ['test', 'card', 'zaincash'],
  });
  await w.page.goto(s.url);
  expect(await w.page.locator('#total-amount').textContent()).toBe('$12.50');
  expect(await w.page.locator('#pay').textContent()).toContain('Pay $12.50');
  for (const name of ['Card', 'ZainCash']) {
    const radio = w.page.getByRole('radio', { name });
    expect(await radio.isDisabled()).toBe(true);
    expect(await radio.getAttribute('aria-describedby')).toMatch(/^method-note-/);
  }
  expect(await w.page.locator('#method-note-card').textContent()).toBe('Not available yet');
  expect(await w.page.getByRole('radio', { name: 'Test gateway' }).isChecked()).toBe(true);
  await screenshots(w.page, 'methods-unavailable');
});

it('escapes everything the merchant and shopper wrote', async () => {
  const hostile = '<img src=x onerror="window.__owned=1">&amp;"\'';
  const s = await order({
    ...quick,
    locale: 'en',
    reference_id: `ref-${Date.now()}<b>`,
    line_items: [{ label: hostile, amount: 27000, type: 'charge' }],
  });
  await w.stack
    .db('merchants')
    .where({ id: w.shop.merchantId })
    .update({ display_name: `Shop ${hostile}` });
  try {
    await w.page.goto(s.url);
    expect(await w.page.locator('.item-label').first().textContent()).toBe(hostile);
    expect(plain(await w.page.locator('.merchant-name').textContent())).toBe(`Shop ${hostile}`);
    expect(await w.page.locator('img[src="x"]').count()).toBe(0);
    expect(await w.page.evaluate('window.__owned')).toBeUndefined();
  } finally {
    await w.stack.db('merchants').where({ id: w.shop.merchantId }).update({ display_name: 'Dar Al-Kutub' });
  }
});

it('labels every input, and a keyboard alone can choose a method and pay, with visible focus', async () => {
  const s = await order({
    locale: 'en',
    collect: { phone: 'optional', name: 'required', shipping_address: 'optional' },
  });
  await w.page.goto(s.url);
  const unlabelled = await w.page.evaluate(`Array.from(document.querySelectorAll('input, select'))
    .filter((el) => el.type !== 'hidden' && (!el.labels || el.labels.length === 0) && !el.getAttribute('aria-label'))
    .map((el) => el.id || el.name)`);
  expect(unlabelled).toEqual([]);

  const focused = () =>
    w.page.evaluate(`(() => {
      const el = document.activeElement;
      const style = getComputedStyle(el);
      return { id: el.id, name: el.getAttribute('name'), value: el.value, text: el.textContent.trim(),
               outline: style.outlineStyle, width: parseFloat(style.outlineWidth) };
    })()`) as Promise<{ id: string; name: string | null; value: string; text: string; outline: string; width: number }>;

  await w.page.getByLabel('Full name').focus();
  await w.page.keyboard.type('Ali Hassan');
  // Tab through the rest of the form to the methods; every stop shows its focus ring.
  for (let i = 0; i < 20; i++) {
    await w.page.keyboard.press('Tab');
    const f = await focused();
    expect(f.outline).not.toBe('none');
    expect(f.width).toBeGreaterThanOrEqual(2);
    if (f.name === 'method') break;
  }
  expect((await focused()).value).toBe('test');
  await w.page.keyboard.press('ArrowDown');
  expect((await focused()).value).toBe('cashondelivery');
  await w.page.keyboard.press('Tab');
  expect((await focused()).id).toBe('pay');
  expect((await focused()).text).toBe('Confirm order');
  await screenshots(w.page, 'keyboard-focus');
  await w.page.keyboard.press('Enter');
  await w.page.getByRole('heading', { name: 'Order confirmed' }).waitFor();
  const row = await w.stack.db('checkout_sessions').where({ id: s.id }).first();
  expect(row.customer.name).toBe('Ali Hassan');
});

it('fits a 320-pixel phone screen without sideways scrolling, in Arabic and in English', async () => {
  const s = await order({
    locale: 'ar',
    collect: { phone: 'required', name: 'required', shipping_address: 'required' },
  });
  await w.page.setViewportSize({ width: 320, height: 640 });
  for (const lang of ['ar', 'en', 'ku']) {
    await w.page.goto(`${s.url}?lang=${lang}`);
    const overflow = await w.page.evaluate('document.documentElement.scrollWidth - window.innerWidth');
    expect(overflow).toBeLessThanOrEqual(0);
    const fontSize = await w.page.evaluate("parseFloat(getComputedStyle(document.querySelector('input')).fontSize)");
    expect(fontSize).toBeGreaterThanOrEqual(16);
  }
});

it('says checkout is unavailable, in the session’s language, while the merchant is suspended', async () => {
  const suspended = await buildShop(w.stack);
  const s = await openSession(w.stack, suspended.secretKey, orderBody({ ...quick, locale: 'ar' }));
  await setMerchantSuspended(w.stack.db, suspended.merchantId, true);
  const response = await w.page.goto(s.url);
  expect(response?.status()).toBe(503);
  expect(await h1(w.page)).toBe('الدفع غير متاح حاليًا');
});
