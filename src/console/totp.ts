import { Secret, TOTP } from 'otpauth';

/** RFC 6238 defaults every authenticator app reads: SHA-1, 6 digits, 30 s. */
const PERIOD_SECONDS = 30;

function totpOf(secretBase32: string, label = 'console'): TOTP {
  return new TOTP({
    issuer: 'svc-payments console',
    label,
    algorithm: 'SHA1',
    digits: 6,
    period: PERIOD_SECONDS,
    secret: Secret.fromBase32(secretBase32),
  });
}

/** A new secret (160 bits), base32 as authenticator apps take it. */
export const newTotpSecret = (): string => new Secret({ size: 20 }).base32;

/** The otpauth:// URI an authenticator app imports (shown beside the secret on the invite page). */
export const totpUri = (secretBase32: string, email: string): string => totpOf(secretBase32, email).toString();

/** The code for `at` (tests and the demo print it). */
export const totpCode = (secretBase32: string, at: Date): string =>
  totpOf(secretBase32).generate({ timestamp: at.getTime() });

/**
 * The time step `code` is valid for at `at` (one step of drift either way), or null. The caller
 * refuses a step not after the last one used, so a code works once.
 */
export function totpStep(secretBase32: string, code: string, at: Date): number | null {
  if (!/^\d{6}$/.test(code)) return null;
  const delta = totpOf(secretBase32).validate({ token: code, timestamp: at.getTime(), window: 1 });
  if (delta === null) return null;
  return Math.floor(at.getTime() / 1000 / PERIOD_SECONDS) + delta;
}
