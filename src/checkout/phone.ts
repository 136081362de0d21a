/** Iraqi mobile numbers: 10 digits starting with 7 after the country code 964. */
const IRAQI_NATIONAL = /^7[0-9]{9}$/;
const E164 = /^\+[1-9][0-9]{6,14}$/;

/**
 * Normalises a phone number to E.164. Iraqi local formats (`07701234567`, `7701234567`,
 * `9647701234567`, `009647701234567`, and `+964 0770…` with the trunk 0 kept) become
 * `+9647701234567`; other numbers must already be E.164. Spaces, dashes and parentheses are
 * ignored. Null when it is not a phone number.
 */
export function normalisePhone(input: string): string | null {
  // An Iraqi number written internationally with its trunk 0 kept (+964 0770…) drops the 0.
  const compact = input.replace(/[\s\-()]/g, '').replace(/^(\+|00)9640/, '+964');
  if (E164.test(compact)) return compact;
  const digits = compact.replace(/^00/, '');
  if (!/^[0-9]+$/.test(digits)) return null;
  const national = digits.startsWith('964') ? digits.slice(3) : digits.startsWith('0') ? digits.slice(1) : digits;
  return IRAQI_NATIONAL.test(national) ? `+964${national}` : null;
}
