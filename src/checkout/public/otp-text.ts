/** The OTP text message in the session's language; the code stays in Western digits for autofill. */
const templates: Record<string, (code: string, minutes: number) => string> = {
  en: (code, minutes) => `Your verification code is ${code}. It expires in ${minutes} minutes.`,
  ar: (code, minutes) => `رمز التحقق الخاص بك: ${code}. صالح لمدة ${minutes} دقائق.`,
  ku: (code, minutes) => `کۆدی پشتڕاستکردنەوە: ${code}. بۆ ماوەی ${minutes} خولەک کار دەکات.`,
};

/** The message for `locale` (`ar`, `ku`, `en`; anything else gets English). */
export function otpMessage(locale: string, code: string, minutes: number): string {
  return (templates[locale] ?? templates.en)(code, minutes);
}
