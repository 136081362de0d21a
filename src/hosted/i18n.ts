import { ar } from './locales/ar';
import { en, MessageKey, Messages } from './locales/en';
import { ku } from './locales/ku';

/** The hosted page's languages, in the order the language switch lists them. */
export const langs = ['ar', 'ku', 'en'] as const;
export type Lang = (typeof langs)[number];

const messages: Record<Lang, Messages> = { ar, ku, en };

/** What each language needs on `<html>`: the BCP 47 tag (Sorani is `ckb`) and the writing direction. */
export const langInfo: Record<Lang, { tag: string; dir: 'rtl' | 'ltr' }> = {
  ar: { tag: 'ar', dir: 'rtl' },
  ku: { tag: 'ckb', dir: 'rtl' },
  en: { tag: 'en', dir: 'ltr' },
};

/** The service's default page language (a session created without `locale` reads `ar`). */
export const defaultLang: Lang = 'ar';

/**
 * The page language for a `locale` value (a session's, a query's or a cookie's): `ar`, `ku` and
 * `en` with any region (`ar-IQ`), and `ckb` (Sorani's own code) for Kurdish; null for anything else.
 */
export function langOf(locale: string | null | undefined): Lang | null {
  const base = (locale ?? '').trim().toLowerCase().split(/[-_]/)[0];
  if (base === 'ckb') return 'ku';
  return (langs as readonly string[]).includes(base) ? (base as Lang) : null;
}

/**
 * The message `key` in `lang` with `{name}` placeholders filled in (plain text: templates escape
 * it). In right-to-left languages each value is a bidi island of its own (U+2068 … U+2069), so a
 * Latin shop name or an amount never drags the punctuation around it to the wrong side.
 */
export function t(lang: Lang, key: MessageKey, vars: Record<string, string | number> = {}): string {
  const fill = langInfo[lang].dir === 'rtl' ? (v: string) => `\u2068${v}\u2069` : (v: string) => v;
  return messages[lang][key].replace(/\{(\w+)\}/g, (whole, name: string) =>
    name in vars ? fill(String(vars[name])) : whole,
  );
}

/** The messages the browser script needs, in `lang`. */
export function clientMessages(lang: Lang, keys: readonly MessageKey[]): Partial<Messages> {
  return Object.fromEntries(keys.map((k) => [k, messages[lang][k]]));
}

/** Why an attempt failed (its `failure_reason`), as the shopper reads it. */
export function failureMessage(reason: string | null, status: string): MessageKey {
  if (status === 'canceled' || reason === 'canceled_by_shopper') return 'failure_canceled';
  if (reason === 'simulated_decline' || reason === 'declined') return 'failure_declined';
  if (reason === 'timeout') return 'failure_timeout';
  return 'failure_other';
}

/** Why a method is unavailable (`unavailable_reason`), as the shopper reads it. */
export function unavailableMessage(reason: string | null): MessageKey {
  switch (reason) {
    case 'vendor_not_configured':
    case 'not_enabled':
    case 'currency_not_supported':
    case 'amount_out_of_range':
      return `reason_${reason}`;
    default:
      return 'reason_other';
  }
}

/**
 * Iraq's governorates (the Kurdistan Region's four included). The stored value is the English
 * name, so the merchant's systems read one spelling whatever language the shopper used.
 */
export const governorates: ReadonlyArray<Record<Lang, string>> = [
  { en: 'Baghdad', ar: 'بغداد', ku: 'بەغدا' },
  { en: 'Basra', ar: 'البصرة', ku: 'بەسرە' },
  { en: 'Nineveh', ar: 'نينوى', ku: 'نەینەوا' },
  { en: 'Erbil', ar: 'أربيل', ku: 'هەولێر' },
  { en: 'Sulaymaniyah', ar: 'السليمانية', ku: 'سلێمانی' },
  { en: 'Duhok', ar: 'دهوك', ku: 'دهۆک' },
  { en: 'Halabja', ar: 'حلبجة', ku: 'هەڵەبجە' },
  { en: 'Kirkuk', ar: 'كركوك', ku: 'کەرکووک' },
  { en: 'Anbar', ar: 'الأنبار', ku: 'ئەنبار' },
  { en: 'Babil', ar: 'بابل', ku: 'بابل' },
  { en: 'Karbala', ar: 'كربلاء', ku: 'کەربەلا' },
  { en: 'Najaf', ar: 'النجف', ku: 'نەجەف' },
  { en: 'Al-Qadisiyah', ar: 'القادسية', ku: 'قادسیە' },
  { en: 'Wasit', ar: 'واسط', ku: 'واست' },
  { en: 'Maysan', ar: 'ميسان', ku: 'میسان' },
  { en: 'Dhi Qar', ar: 'ذي قار', ku: 'زیقار' },
  { en: 'Muthanna', ar: 'المثنى', ku: 'موسەننا' },
  { en: 'Saladin', ar: 'صلاح الدين', ku: 'سەلاحەدین' },
  { en: 'Diyala', ar: 'ديالى', ku: 'دیالە' },
];
