import { otp as otpCounter } from '../../telemetry/checkout';
import { randomInt } from 'node:crypto';
import { ApiError } from '../../http/errors';
import { hit, WindowLimit } from '../../http/rate-limit';
import { constantTimeEqual, sha256Hex } from '../../lib/hash';
import { newId } from '../../lib/ids';
import { otpRules, publicLimits } from '../public-limits';
import type { OtpRequestIn, OtpVerifyIn } from '../schemas';
import type { MerchantScope } from '../sessions/deps';
import type { SessionRow } from '../sessions/session-row';
import { issueCustomerToken } from './customer-tokens';
import type { PublicDeps } from './deps';
import { profileOut } from './public-session';
import { assertOpen, sessionByCode } from './session-lookup';
import { otpMessage } from './otp-text';

interface ChallengeRow {
  id: string;
  code_hash: string;
  failed_attempts: number;
  consumed_at: Date | null;
  expires_at: Date;
}

/** The stored form of a code: bound to its challenge, so equal codes never hash alike. */
const codeHash = (challengeId: string, code: string) => sha256Hex(`${challengeId}:${code}`);

const otpInvalid = (message = 'The code is wrong.') =>
  new ApiError(400, 'otp_invalid', message, [{ field: 'code', issue: 'invalid' }]);
const otpExpired = () =>
  new ApiError(400, 'otp_expired', 'The code has expired or was already used; request a new one.', [
    { field: 'code', issue: 'expired' },
  ]);
const otpLocked = () =>
  new ApiError(429, 'otp_locked', `${otpRules.maxWrongCodes} wrong codes: request a new code.`, [], {
    'Retry-After': String(otpRules.lockedRetryAfterSeconds),
  });

/**
 * `POST /public/sessions/{code}/otp`: sends a 6-digit code to `phone`, which must be in an allowed
 * country (else `400 validation_error`, issue `country_not_allowed`), within the limits per client IP, per session, per merchant and
 * mode, and per phone (429). In live mode the code goes through the SMS adapter (`sent: true`). In
 * test mode nothing is ever sent (`sent: false`): the test phone always gets 000000 and no message,
 * any other number's code is kept in the outbox only. `retry_after` says when the page may offer to
 * send another.
 */
export async function requestOtp(
  deps: PublicDeps,
  scope: MerchantScope,
  code: string,
  input: OtpRequestIn,
  clientIp: string,
): Promise<{ sent: boolean; retry_after: number }> {
  const { db } = deps;
  const now = deps.clock();
  const session = await sessionByCode(db, scope, code);
  assertOpen(session, now);
  const testPhone = scope.mode === 'test' && input.phone === deps.testPhone;
  if (!testPhone && !deps.otpCountryCodes.some((c) => input.phone.startsWith(`+${c}`))) {
    throw ApiError.validation(
      `Codes are sent only to numbers in these countries: ${deps.otpCountryCodes.map((c) => `+${c}`).join(', ')}.`,
      [{ field: 'phone', issue: 'country_not_allowed' }],
    );
  }
  const limit = async (bucket: string, rule: WindowLimit, what: string) => {
    const result = await hit(db, bucket, rule, now);
    if (!result.allowed) {
      throw ApiError.rateLimited(
        result.retryAfter,
        `At most ${rule.limit} codes per ${what} every ${rule.windowSeconds / 60} minutes.`,
      );
    }
    return result;
  };
  await limit(`otp-ip:${clientIp}`, publicLimits.otpPerIp, 'client IP');
  await limit(`otp-session:${session.id}`, publicLimits.otpPerSession, 'session');
  await limit(`otp-merchant:${scope.merchantId}:${scope.mode}`, publicLimits.otpPerMerchantMode, 'merchant');
  const perPhone = await limit(`otp-phone:${input.phone}`, publicLimits.otpPerPhone, 'phone number');

  const otp = testPhone ? otpRules.testPhoneCode : String(randomInt(0, 1_000_000)).padStart(6, '0');
  const id = newId('otp');
  await db('otp_challenges').insert({
    id,
    session_id: session.id,
    phone: input.phone,
    code_hash: codeHash(id, otp),
    expires_at: new Date(now.getTime() + otpRules.codeTtlMs),
    created_at: now,
  });
  if (!testPhone) {
    await (scope.mode === 'test' ? deps.testSms : deps.sms).send({
      to: input.phone,
      body: otpMessage(session.locale, otp, otpRules.codeTtlMs / 60_000),
    });
  }
  const lastInWindow = perPhone.count >= publicLimits.otpPerPhone.limit;
  return {
    sent: scope.mode === 'live',
    retry_after: lastInWindow
      ? Math.max(perPhone.retryAfter, otpRules.resendAfterSeconds)
      : otpRules.resendAfterSeconds,
  };
}

/**
 * `POST /public/sessions/{code}/otp/verify`: checks the latest code sent to `phone` for this
 * session. Right: the session's phone is verified and a customer token for this session is issued.
 * Wrong: `otp_invalid`, and after five wrong codes `otp_locked` until a new code is requested.
 */
export async function verifyOtp(deps: PublicDeps, scope: MerchantScope, code: string, input: OtpVerifyIn) {
  const { db } = deps;
  const now = deps.clock();
  const session = await sessionByCode(db, scope, code);
  assertOpen(session, now);
  const challenge: ChallengeRow | undefined = await db('otp_challenges')
    .where({ session_id: session.id, phone: input.phone })
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ])
    .first();
  if (!challenge) throw otpInvalid('No code was sent to this phone number for this session.');
  if (challenge.consumed_at || new Date(challenge.expires_at).getTime() <= now.getTime()) throw otpExpired();
  if (challenge.failed_attempts >= otpRules.maxWrongCodes) throw otpLocked();

  if (!constantTimeEqual(codeHash(challenge.id, input.code), challenge.code_hash)) {
    // Counted atomically: concurrent guesses cannot get past the limit.
    const [counted] = await db('otp_challenges')
      .where({ id: challenge.id })
      .where('failed_attempts', '<', otpRules.maxWrongCodes)
      .increment('failed_attempts', 1)
      .returning('failed_attempts');
    if (!counted) throw otpLocked();
    if (counted.failed_attempts === otpRules.maxWrongCodes) otpCounter.inc({ event: 'locked', reason: 'none' });
    const left = otpRules.maxWrongCodes - counted.failed_attempts;
    throw otpInvalid(`The code is wrong; ${left} ${left === 1 ? 'try' : 'tries'} left before the code is locked.`);
  }

  return db.transaction(async (trx) => {
    const consumed = await trx('otp_challenges')
      .where({ id: challenge.id })
      .whereNull('consumed_at')
      .where('failed_attempts', '<', otpRules.maxWrongCodes)
      .update({ consumed_at: now });
    if (consumed === 0) throw otpExpired();
    const [verified]: SessionRow[] = await trx('checkout_sessions')
      .where({ id: session.id, status: 'open' })
      .update({
        customer: trx.raw('customer || ?::jsonb', [JSON.stringify({ phone: input.phone, phone_verified: true })]),
        updated_at: now,
      })
      .returning('*');
    if (!verified) throw ApiError.conflict('session_not_open', 'The session is no longer open.');
    const { token, expiresAt } = await issueCustomerToken(trx, { sessionId: session.id, phone: input.phone, now });
    return { customer_token: token, expires_at: expiresAt.toISOString(), profile: profileOut(verified) };
  });
}
