import { formatMoney, formatPhone } from '../../src/hosted/format';
import { html, jsonScript, raw } from '../../src/hosted/html';
import { failureMessage, langOf, t } from '../../src/hosted/i18n';
import { ar } from '../../src/hosted/locales/ar';
import { en } from '../../src/hosted/locales/en';
import { ku } from '../../src/hosted/locales/ku';
import { textOn } from '../../src/hosted/templates/layout';

describe('html templates', () => {
  it('escape every interpolated value, in text and in quoted attributes', () => {
    const value = `<script>"x" & 'y'</script>`;
    expect(html`<p title="${value}">${value}</p>`.markup).toBe(
      '<p title="&lt;script&gt;&quot;x&quot; &amp; &#39;y&#39;&lt;/script&gt;">' +
        '&lt;script&gt;&quot;x&quot; &amp; &#39;y&#39;&lt;/script&gt;</p>',
    );
  });

  it('keep nested templates and raw markup as they are, join arrays, and render nothing for null, undefined and booleans', () => {
    const tag = html; // not named `html`, so the formatter leaves the markup exactly as written
    const items = ['<a>', 'b'].map((i) => tag`<li>${i}</li>`);
    expect(tag`<ul>${items}</ul>${null}${undefined}${false}${true}${raw('<hr>')}`.markup).toBe(
      '<ul><li>&lt;a&gt;</li><li>b</li></ul><hr>',
    );
    expect(tag`${0}`.markup).toBe('0');
  });

  it('put JSON in a script block that no value can close', () => {
    const out = jsonScript({ a: '</script><!--', b: '&\u2028\u2029' }).markup;
    expect(out).not.toMatch(/[<>&\u2028\u2029]/);
    expect(JSON.parse(out)).toEqual({ a: '</script><!--', b: '&\u2028\u2029' });
  });
});

describe('formatMoney', () => {
  it('shows IQD without a minor unit and USD with cents', () => {
    expect(formatMoney(45000, 'IQD', 'en')).toBe('45,000 IQD');
    expect(formatMoney(45000, 'IQD', 'ar')).toBe('45,000 د.ع');
    expect(formatMoney(45000, 'IQD', 'ku')).toBe('45,000 دینار');
    expect(formatMoney(1250, 'USD', 'en')).toBe('$12.50');
    expect(formatMoney(5, 'USD', 'en')).toBe('$0.05');
    expect(formatMoney(123456789, 'USD', 'ar')).toBe('1,234,567.89 دولار');
    expect(formatMoney(999, 'IQD', 'en')).toBe('999 IQD');
  });

  it('is exact for any safe integer', () => {
    expect(formatMoney(Number.MAX_SAFE_INTEGER, 'IQD', 'en')).toBe('9,007,199,254,740,991 IQD');
    expect(formatMoney(Number.MAX_SAFE_INTEGER, 'USD', 'en')).toBe('$90,071,992,547,409.91');
  });

  it('keeps the minus before the digits in right-to-left text (isolated)', () => {
    expect(formatMoney(-2000, 'IQD', 'ar')).toBe('\u2066−2,000\u2069 د.ع');
    expect(formatMoney(-250, 'USD', 'en')).toBe('\u2066−$2.50\u2069');
  });
});

it('formatPhone writes Iraqi mobiles as Iraqis do, without a line break, and leaves others alone', () => {
  expect(formatPhone('+9647701234567')).toBe('0770\u00a0123\u00a04567');
  expect(formatPhone('+442071234567')).toBe('+442071234567');
});

it('langOf maps locales to page languages, Sorani included, and nothing else', () => {
  expect(['ar', 'AR-iq', 'ku', 'ckb', 'ckb-IQ', 'en', 'en_GB', 'fr', '', null].map(langOf)).toEqual([
    'ar',
    'ar',
    'ku',
    'ku',
    'ku',
    'en',
    'en',
    null,
    null,
    null,
  ]);
});

describe('locales', () => {
  const placeholders = (text: string) => [...text.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();

  it('have every message, with the same placeholders as English', () => {
    for (const locale of [ar, ku]) {
      expect(Object.keys(locale).sort()).toEqual(Object.keys(en).sort());
      for (const [key, text] of Object.entries(en)) {
        expect({ key, placeholders: placeholders(locale[key as keyof typeof en]) }).toEqual({
          key,
          placeholders: placeholders(text),
        });
      }
    }
  });

  it('fill placeholders in and leave unknown ones visible', () => {
    expect(t('en', 'pay', { amount: '1 IQD' })).toBe('Pay 1 IQD');
    expect(t('en', 'pay')).toBe('Pay {amount}');
    // Right to left, each value is isolated.
    expect(t('ar', 'pay', { amount: '1 د.ع' })).toBe('ادفع \u20681 د.ع\u2069');
  });

  it('explain each failure reason', () => {
    expect(failureMessage('simulated_decline', 'failed')).toBe('failure_declined');
    expect(failureMessage('declined', 'failed')).toBe('failure_declined');
    expect(failureMessage('canceled_by_shopper', 'canceled')).toBe('failure_canceled');
    expect(failureMessage('timeout', 'failed')).toBe('failure_timeout');
    expect(failureMessage('gateway_error', 'failed')).toBe('failure_other');
  });
});

it('textOn picks the readable text colour for a merchant accent', () => {
  expect(textOn('#ffffff')).toBe('#000000');
  expect(textOn('#fde68a')).toBe('#000000');
  expect(textOn('#000')).toBe('#ffffff');
  expect(textOn('#9a3412')).toBe('#ffffff');
  expect(textOn('#0f766e')).toBe('#ffffff');
});
