import { minorUnitExponents } from '../checkout/money';
import type { Lang } from './i18n';

/** How each language labels a currency, and on which side of the number. */
const currencyLabels: Record<string, Record<Lang, { label: string; before: boolean }>> = {
  IQD: {
    en: { label: 'IQD', before: false },
    ar: { label: 'د.ع', before: false },
    ku: { label: 'دینار', before: false },
  },
  USD: {
    en: { label: '$', before: true },
    ar: { label: 'دولار', before: false },
    ku: { label: 'دۆلار', before: false },
  },
};

/** Digits grouped by thousands with commas (`1234567` → `1,234,567`). */
const grouped = (digits: string) => digits.replace(/\B(?=(\d{3})+(?!\d))/g, ',');

/**
 * An amount in minor units as the shopper reads it: `25,000 IQD` / `25,000 د.ع` (IQD has no minor
 * unit), `$12.50` / `12.50 دولار` (USD has cents). Latin digits in every language, as Iraqi shops,
 * banks and wallets print prices. Exact for any integer (no floating point).
 */
export function formatMoney(amount: number, currency: string, lang: Lang): string {
  const exponent = minorUnitExponents[currency] ?? 2;
  const digits = Math.abs(amount)
    .toString()
    .padStart(exponent + 1, '0');
  const whole = grouped(exponent > 0 ? digits.slice(0, -exponent) : digits);
  const number = exponent > 0 ? `${whole}.${digits.slice(-exponent)}` : whole;
  const label = currencyLabels[currency]?.[lang] ?? { label: currency, before: false };
  if (amount < 0) {
    // Isolated, so the minus stays before the digits in right-to-left text.
    return label.before ? ltr(`−${label.label}${number}`) : `${ltr(`−${number}`)} ${label.label}`;
  }
  return label.before ? `${label.label}${number}` : `${number} ${label.label}`;
}

/**
 * An E.164 Iraqi mobile number as Iraqis write it (`+9647701234567` → `0770 123 4567`, with
 * no-break spaces so it never wraps); others unchanged.
 */
export function formatPhone(e164: string): string {
  const m = /^\+964(7\d{2})(\d{3})(\d{4})$/.exec(e164);
  return m ? `0${m[1]}\u00a0${m[2]}\u00a0${m[3]}` : e164;
}

/**
 * `text` isolated as left-to-right (U+2066 … U+2069): a phone number or a signed amount keeps
 * its digit groups in order inside Arabic or Kurdish text.
 */
export const ltr = (text: string): string => `\u2066${text}\u2069`;

/** `text` isolated in its own direction (U+2068 … U+2069): a merchant's reference in any script. */
export const isolated = (text: string): string => `\u2068${text}\u2069`;
