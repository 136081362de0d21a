import type { WindowLimit } from '../http/rate-limit';

/** Rate limits of the public surface (fixed windows in Postgres, shared by every API process). */
export const publicLimits = {
  /** Every `/v1/public/*` request, per client IP. */
  perIp: { limit: 300, windowSeconds: 60 },
  /** OTP code requests per phone number, across sessions. */
  otpPerPhone: { limit: 5, windowSeconds: 600 },
  /** OTP code requests per client IP. */
  otpPerIp: { limit: 20, windowSeconds: 600 },
  /** OTP code requests per session, whatever the IP or phone (a day: at least a session's life). */
  otpPerSession: { limit: 10, windowSeconds: 24 * 60 * 60 },
  /** OTP code requests per merchant and mode in an hour: a ceiling on what one merchant's page can cost in SMS. */
  otpPerMerchantMode: { limit: 600, windowSeconds: 60 * 60 },
  /** Payment attempts started per session. */
  attemptsPerSession: { limit: 10, windowSeconds: 600 },
} as const satisfies Record<string, WindowLimit>;

/** Phone verification by SMS code. */
export const otpRules = {
  /** A code is good for this long. */
  codeTtlMs: 10 * 60 * 1000,
  /** Wrong codes a challenge takes; after them it is locked until a new code is requested. */
  maxWrongCodes: 5,
  /** Retry-After of `429 otp_locked`. */
  lockedRetryAfterSeconds: 600,
  /** The `retry_after` hint of an OTP request: when the page may offer to send another code. */
  resendAfterSeconds: 60,
  /** The code the test phone always gets (test mode), with no message sent. */
  testPhoneCode: '000000',
} as const;

/** A customer token lives this long and is valid only for the session that issued it. */
export const customerTokenTtlMs = 60 * 60 * 1000;
