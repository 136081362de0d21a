import { sha256Hex } from '../../src/lib/hash';
import { otpRules, publicLimits } from '../../src/checkout/public-limits';
import { buildMerchant } from '../helpers/factories';
import { call } from '../helpers/http';
import {
  createSession,
  expectError,
  HOUR,
  MINUTE,
  randomIp,
  randomPhone,
  sessionBody,
  shopper,
  smsCode,
  withFrozenClock,
} from '../helpers/checkout-payments';
import { listen, startStack, Stack } from '../helpers/stack';
import { createApp } from '../../src/app';

/**
 * Phone verification on the hosted page: `POST …/otp` (SMS through the outbox adapter, the test
 * phone, limits per phone and per IP), `POST …/otp/verify` (customer token, wrong, stale and
 * locked codes) and what the token is good for.
 */
let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack.stop());

async function setup(over: Record<string, unknown> = {}) {
  const m = await buildMerchant(stack.db);
  const s = await createSession(
    stack,
    m.secretKey,
    sessionBody({ expires_at: new Date(stack.clock().getTime() + 3 * HOUR).toISOString(), ...over }),
  );
  const pub = shopper(stack, m.publishableKey);
  const requestCode = (phone: string, ip?: string) => pub('POST', `/sessions/${s.code}/otp`, { body: { phone }, ip });
  const verify = (phone: string, code: string | undefined) =>
    pub('POST', `/sessions/${s.code}/otp/verify`, { body: { phone, code } });
  return { m, s, pub, requestCode, verify };
}

/** Runs `body` with the app clock frozen at the start of a 10-minute window of its own. */
async function inFreshOtpWindow(body: () => Promise<void>): Promise<void> {
  const window = publicLimits.otpPerPhone.windowSeconds * 1000;
  // Ahead by a random number of windows (days at most), so no other test shares the window.
  const at = new Date((Math.floor(Date.now() / window) + 6 + Math.floor(Math.random() * 1000)) * window);
  await withFrozenClock(stack, at, body);
}

/** Sessions must outlive a clock moved hours ahead. */
const farExpiry = () => ({ expires_at: new Date(stack.clock().getTime() + 23 * HOUR).toISOString() });

describe('POST /v1/public/sessions/{code}/otp', () => {
  it('live mode: answers 202 {sent: true, retry_after: 60} and queues the 6-digit code for the SMS relay', async () => {
    const m = await buildMerchant(stack.db, { mode: 'live', methods: ['cashondelivery'] });
    const s = await createSession(stack, m.secretKey, {
      ...sessionBody({ locale: 'en' }),
      payment_method_types: ['cashondelivery'],
    });
    const phone = randomPhone();
    const res = await shopper(stack, m.publishableKey)('POST', `/sessions/${s.code}/otp`, { body: { phone } });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ sent: true, retry_after: 60 });
    const rows = await stack.db('outbox').where({ kind: 'sms', to: phone });
    expect(rows).toEqual([expect.objectContaining({ test_mode: false, next_attempt_at: expect.any(Date) })]);
    expect(rows[0].body).toMatch(/^Your verification code is \d{6}\. It expires in 10 minutes\.$/);
  });

  it('test mode: answers 202 {sent: false} and keeps the code of any number in the outbox only, never sent', async () => {
    const { requestCode } = await setup({ locale: 'en' });
    const phone = randomPhone();
    const res = await requestCode(phone);
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ sent: false, retry_after: 60 });
    const rows = await stack.db('outbox').where({ kind: 'sms', to: phone });
    expect(rows).toEqual([expect.objectContaining({ test_mode: true, next_attempt_at: null, sent_at: null })]);
    expect(rows[0].body).toMatch(/^Your verification code is \d{6}\. It expires in 10 minutes\.$/);
  });

  it.each([
    ['ar', /^رمز التحقق الخاص بك: \d{6}\. صالح لمدة 10 دقائق\.$/],
    ['ku', /^کۆدی پشتڕاستکردنەوە: \d{6}\. بۆ ماوەی 10 خولەک کار دەکات\.$/],
  ])('writes the text message in the session language (%s), the code in Western digits', async (locale, text) => {
    const { requestCode } = await setup({ locale });
    const phone = randomPhone();
    expect((await requestCode(phone)).status).toBe(202);
    const [row] = await stack.db('outbox').where({ kind: 'sms', to: phone });
    expect(row.body).toMatch(text);
  });

  it('stores the code hashed, never in the clear', async () => {
    const { s, requestCode } = await setup();
    const phone = randomPhone();
    await requestCode(phone);
    const code = (await smsCode(stack.db, phone))!;
    const [challenge] = await stack.db('otp_challenges').where({ session_id: s.id, phone });
    expect(JSON.stringify(challenge)).not.toContain(code);
    expect(challenge.code_hash).toBe(sha256Hex(`${challenge.id}:${code}`));
  });

  it('normalises an Iraqi local number to E.164', async () => {
    const { requestCode, verify } = await setup();
    const national = randomPhone().slice(4); // 7XXXXXXXXX
    expect((await requestCode(`0${national}`)).status).toBe(202);
    const code = await smsCode(stack.db, `+964${national}`);
    const res = await verify(`964${national}`, code);
    expect(res.status).toBe(200);
  });

  it('gives the test phone the code 000000 and sends no message (sent: false)', async () => {
    await inFreshOtpWindow(async () => {
      const { requestCode, verify } = await setup(farExpiry());
      const before = await stack.db('outbox').where({ to: stack.settings.TEST_PHONE }).count({ n: '*' });
      const res = await requestCode(stack.settings.TEST_PHONE);
      expect(res.status).toBe(202);
      expect(res.body).toEqual({ sent: false, retry_after: 60 });
      expect(await stack.db('outbox').where({ to: stack.settings.TEST_PHONE }).count({ n: '*' })).toEqual(before);
      expect((await verify(stack.settings.TEST_PHONE, otpRules.testPhoneCode)).status).toBe(200);
    });
  });

  it('answers 400 validation_error for a phone that is not one', async () => {
    const { requestCode } = await setup();
    expectError(await requestCode('12345'), 400, 'validation_error', [
      { field: 'phone', issue: 'Must be an E.164 phone number or an Iraqi local number' },
    ]);
  });

  it('answers 409 session_not_open for a session that is not open', async () => {
    const { m, s, requestCode } = await setup();
    await call(stack.baseUrl, 'POST', `/v1/checkout/sessions/${s.id}/expire`, { key: m.secretKey });
    expectError(await requestCode(randomPhone()), 409, 'session_not_open');
  });

  it('answers 429 rate_limited with Retry-After after 5 codes per phone in 10 minutes, from any IP and session', async () => {
    await inFreshOtpWindow(async () => {
      const a = await setup(farExpiry());
      const b = await setup(farExpiry());
      const phone = randomPhone();
      const answers = [];
      for (let i = 0; i < 5; i++) answers.push(await (i % 2 ? a : b).requestCode(phone, randomIp()));
      expect(answers.map((r) => r.status)).toEqual([202, 202, 202, 202, 202]);
      // The last code of the window says when the next one can be asked for.
      expect(answers[4].body).toEqual({ sent: false, retry_after: 600 });
      const over = await a.requestCode(phone, randomIp());
      expectError(over, 429, 'rate_limited');
      expect(over.headers.get('retry-after')).toBe('600');
      expect((await a.requestCode(randomPhone())).status).toBe(202);
      stack.clock.advance(10 * MINUTE);
      expect((await a.requestCode(phone)).status).toBe(202);
    });
  });

  it('answers 429 rate_limited with Retry-After after 20 codes per client IP in 10 minutes', async () => {
    await inFreshOtpWindow(async () => {
      const sessions = [await setup(farExpiry()), await setup(farExpiry()), await setup(farExpiry())];
      const requestCode = (phone: string, ip?: string) => sessions[0].requestCode(phone, ip);
      const ip = randomIp();
      for (let i = 0; i < 20; i++) expect((await sessions[i % 3].requestCode(randomPhone(), ip)).status).toBe(202);
      const over = await requestCode(randomPhone(), ip);
      expectError(over, 429, 'rate_limited');
      expect(over.headers.get('retry-after')).toBe('600');
      expect((await requestCode(randomPhone(), randomIp())).status).toBe(202);
    });
  });
});

describe('OTP limits that do not depend on the client IP', () => {
  it(`answers 429 rate_limited after ${publicLimits.otpPerSession.limit} codes on one session, from any IP and phone`, async () => {
    await inFreshOtpWindow(async () => {
      const { requestCode } = await setup(farExpiry());
      const answers = [];
      for (let i = 0; i < publicLimits.otpPerSession.limit; i++)
        answers.push(await requestCode(randomPhone(), randomIp()));
      expect(answers.every((r) => r.status === 202)).toBe(true);
      const over = await requestCode(randomPhone(), randomIp());
      expectError(over, 429, 'rate_limited');
      expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0);
      // Another session of the same merchant is not affected.
      expect((await (await setup(farExpiry())).requestCode(randomPhone(), randomIp())).status).toBe(202);
    });
  });

  it(`answers 429 rate_limited after ${publicLimits.otpPerMerchantMode.limit} codes per merchant and mode in an hour`, async () => {
    await inFreshOtpWindow(async () => {
      const a = await setup(farExpiry());
      expect((await a.requestCode(randomPhone(), randomIp())).status).toBe(202);
      // The rest of the hour's codes, as many shoppers on many sessions would have asked for them.
      const windowMs = publicLimits.otpPerMerchantMode.windowSeconds * 1000;
      await stack
        .db('rate_limit_windows')
        .where({ bucket: `otp-merchant:${a.m.merchantId}:test` })
        .where('window_start', new Date(Math.floor(stack.clock().getTime() / windowMs) * windowMs))
        .update({ count: publicLimits.otpPerMerchantMode.limit });
      const over = await a.requestCode(randomPhone(), randomIp());
      expectError(over, 429, 'rate_limited');
      expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0);
      // Another merchant is not affected.
      expect((await (await setup(farExpiry())).requestCode(randomPhone(), randomIp())).status).toBe(202);
    });
  });

  it('refuses a number outside the allowed countries (default Iraq, +964) with 400 validation_error; nothing is queued', async () => {
    const { requestCode } = await setup();
    for (const phone of ['+14155550123', '+447700900123', '+9715012345678']) {
      expectError(await requestCode(phone, randomIp()), 400, 'validation_error', [
        { field: 'phone', issue: 'country_not_allowed' },
      ]);
      expect(await stack.db('outbox').where({ to: phone }).first()).toBeUndefined();
    }
  });

  it('counts on the connection address, not X-Forwarded-For, when TRUST_PROXY is off', async () => {
    const direct = await listen(createApp({ ...stack.deps, settings: { ...stack.deps.settings, TRUST_PROXY: 0 } }));
    try {
      await inFreshOtpWindow(async () => {
        const sessions = [await setup(farExpiry()), await setup(farExpiry()), await setup(farExpiry())];
        const ask = (i: number) =>
          shopper(direct, sessions[i % 3].m.publishableKey)('POST', `/sessions/${sessions[i % 3].s.code}/otp`, {
            body: { phone: randomPhone() },
            ip: randomIp(), // a new spoofed address every time: ignored
          });
        for (let i = 0; i < publicLimits.otpPerIp.limit; i++) expect((await ask(i)).status).toBe(202);
        expectError(await ask(0), 429, 'rate_limited');
      });
    } finally {
      await direct.close();
    }
  });

  it('takes the address the trusted proxy appended (TRUST_PROXY=1): the client-written part is ignored', async () => {
    await inFreshOtpWindow(async () => {
      const sessions = [await setup(farExpiry()), await setup(farExpiry()), await setup(farExpiry())];
      const real = randomIp();
      const ask = (i: number) =>
        sessions[i % 3].pub('POST', `/sessions/${sessions[i % 3].s.code}/otp`, {
          body: { phone: randomPhone() },
          ip: `${randomIp()}, ${real}`,
        });
      for (let i = 0; i < publicLimits.otpPerIp.limit; i++) expect((await ask(i)).status).toBe(202);
      expectError(await ask(0), 429, 'rate_limited');
    });
  });
});

describe('POST /v1/public/sessions/{code}/otp/verify', () => {
  it('issues a session-scoped customer token (stored hashed) with expires_at 60 minutes ahead and profile', async () => {
    const { s, requestCode, verify } = await setup({ customer: { name: 'Huda' } });
    const phone = randomPhone();
    await requestCode(phone);
    await withFrozenClock(stack, stack.clock(), async () => {
      const res = await verify(phone, await smsCode(stack.db, phone));
      expect(res.status).toBe(200);
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(res.body).toEqual({
        customer_token: expect.stringMatching(/^ctok_[A-Za-z0-9]{16}_[A-Za-z0-9]{32}$/),
        expires_at: new Date(stack.clock().getTime() + HOUR).toISOString(),
        profile: { name: 'Huda', addresses: [], instruments: [] },
      });
      const [row] = await stack.db('customer_tokens').where({ session_id: s.id });
      expect(JSON.stringify(row)).not.toContain(res.body.customer_token.split('_')[2]);
    });
  });

  it("marks the session's phone verified and sets it as the customer's phone", async () => {
    const { m, s, pub, requestCode, verify } = await setup({ customer: { phone: '07700000001' } });
    const phone = randomPhone();
    await requestCode(phone);
    await verify(phone, await smsCode(stack.db, phone));
    expect((await pub('GET', `/sessions/${s.code}`)).body.customer).toMatchObject({ phone, phone_verified: true });
    const merchantView = await call(stack.baseUrl, 'GET', `/v1/checkout/sessions/${s.id}`, { key: m.secretKey });
    expect(merchantView.body.customer.phone).toBe(phone);
  });

  it('answers 400 otp_invalid for a wrong code, saying how many tries are left', async () => {
    const { requestCode, verify } = await setup();
    const phone = randomPhone();
    await requestCode(phone);
    const right = (await smsCode(stack.db, phone))!;
    const wrong = right === '123456' ? '654321' : '123456';
    const res = await verify(phone, wrong);
    expectError(res, 400, 'otp_invalid', [{ field: 'code', issue: 'invalid' }]);
    expect(res.body.error.message).toBe('The code is wrong; 4 tries left before the code is locked.');
  });

  it('answers 400 otp_invalid when no code was sent to the phone for this session', async () => {
    const { verify } = await setup();
    expectError(await verify(randomPhone(), '123456'), 400, 'otp_invalid', [{ field: 'code', issue: 'invalid' }]);
  });

  it('checks only the latest code sent: an earlier one is otp_invalid', async () => {
    const { requestCode, verify } = await setup();
    const phone = randomPhone();
    await requestCode(phone);
    const first = (await smsCode(stack.db, phone))!;
    await requestCode(phone);
    const second = (await smsCode(stack.db, phone))!;
    if (first !== second)
      expectError(await verify(phone, first), 400, 'otp_invalid', [{ field: 'code', issue: 'invalid' }]);
    expect((await verify(phone, second)).status).toBe(200);
  });

  it('answers 400 otp_expired for a code 10 minutes old', async () => {
    const { requestCode, verify } = await setup();
    const phone = randomPhone();
    await withFrozenClock(stack, stack.clock(), async () => {
      await requestCode(phone);
      const code = await smsCode(stack.db, phone);
      stack.clock.advance(10 * MINUTE);
      expectError(await verify(phone, code), 400, 'otp_expired', [{ field: 'code', issue: 'expired' }]);
    });
  });

  it('accepts a code up to the last millisecond of its 10 minutes', async () => {
    const { requestCode, verify } = await setup();
    const phone = randomPhone();
    await withFrozenClock(stack, stack.clock(), async () => {
      await requestCode(phone);
      stack.clock.advance(10 * MINUTE - 1);
      expect((await verify(phone, await smsCode(stack.db, phone))).status).toBe(200);
    });
  });

  it('answers 400 otp_expired for a code already used', async () => {
    const { requestCode, verify } = await setup();
    const phone = randomPhone();
    await requestCode(phone);
    const code = await smsCode(stack.db, phone);
    expect((await verify(phone, code)).status).toBe(200);
    expectError(await verify(phone, code), 400, 'otp_expired', [{ field: 'code', issue: 'expired' }]);
  });

  it('answers 429 otp_locked with Retry-After 600 after five wrong codes, even to the right one, until a new code is requested', async () => {
    const { requestCode, verify } = await setup();
    const phone = randomPhone();
    await requestCode(phone);
    const right = (await smsCode(stack.db, phone))!;
    const wrong = right === '000001' ? '000002' : '000001';
    for (let i = 0; i < 5; i++) expect((await verify(phone, wrong)).body.error.code).toBe('otp_invalid');
    const locked = await verify(phone, right);
    expectError(locked, 429, 'otp_locked');
    expect(locked.headers.get('retry-after')).toBe('600');
    await requestCode(phone);
    expect((await verify(phone, await smsCode(stack.db, phone))).status).toBe(200);
  });

  it('never lets concurrent wrong guesses past five', async () => {
    const { s, requestCode, verify } = await setup();
    const phone = randomPhone();
    await requestCode(phone);
    const right = (await smsCode(stack.db, phone))!;
    const guesses = Array.from({ length: 12 }, (_, i) => String(i).padStart(6, '9')).filter((g) => g !== right);
    const answers = await Promise.all(guesses.map((g) => verify(phone, g)));
    expect(answers.filter((r) => r.body.error.code === 'otp_invalid')).toHaveLength(5);
    expect(answers.filter((r) => r.body.error.code === 'otp_locked')).toHaveLength(guesses.length - 5);
    const [challenge] = await stack.db('otp_challenges').where({ session_id: s.id, phone });
    expect(challenge.failed_attempts).toBe(5);
  });

  it('answers 400 validation_error for a code that is not 6 digits', async () => {
    const { verify } = await setup();
    expectError(await verify(randomPhone(), '12345'), 400, 'validation_error', [
      { field: 'code', issue: 'Must be the 6-digit code' },
    ]);
  });

  it('answers 409 session_not_open for a session that is not open', async () => {
    const { m, s, requestCode, verify } = await setup();
    const phone = randomPhone();
    await requestCode(phone);
    await call(stack.baseUrl, 'POST', `/v1/checkout/sessions/${s.id}/expire`, { key: m.secretKey });
    expectError(await verify(phone, await smsCode(stack.db, phone)), 409, 'session_not_open');
  });
});
