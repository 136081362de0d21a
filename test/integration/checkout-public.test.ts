import { createCheckoutKey } from '../../src/ops/checkout-keys';
import { setFxRate } from '../../src/ops/fx';
import { setMerchantMethod } from '../../src/ops/merchant-methods';
import { setMerchantSuspended } from '../../src/ops/merchants';
import { randomString } from '../../src/lib/ids';
import { buildMerchant } from '../helpers/factories';
import { call } from '../helpers/http';
import {
  createSession,
  expectError,
  HOUR,
  MINUTE,
  payableBody,
  randomIp,
  sessionBody,
  sessionEvents,
  shopper,
  smsCode,
  until,
  withFrozenClock,
} from '../helpers/checkout-payments';
import { keepHistory } from '../helpers/histories';
import { startStack, Stack } from '../helpers/stack';

/**
 * The hosted page's view of a session: `GET /v1/public/sessions/{code}` (public shape, method
 * availability and presented prices, 404/410, profile), `PUT …/customer`, the shopper's cancel,
 * public key checks and the per-IP limit of the public surface.
 */
let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack.stop());

type Merchant = Awaited<ReturnType<typeof buildMerchant>>;

async function merchantWith(opts: Parameters<typeof buildMerchant>[1] = {}) {
  const name = `Shop ${randomString(6)}`;
  const m = await buildMerchant(stack.db, { name, ...opts });
  return { ...m, name, pub: shopper(stack, m.publishableKey) };
}

/** Verifies `phone` for the session by SMS code; returns the customer token. */
async function verifiedToken(m: { pub: ReturnType<typeof shopper> }, code: string, phone = randomPhoneNumber()) {
  expect((await m.pub('POST', `/sessions/${code}/otp`, { body: { phone } })).status).toBe(202);
  const res = await m.pub('POST', `/sessions/${code}/otp/verify`, {
    body: { phone, code: await smsCode(stack.db, phone) },
  });
  expect(res.status).toBe(200);
  return res.body.customer_token as string;
}
const randomPhoneNumber = () => `+9647${String(100000000 + Math.floor(Math.random() * 899999999))}`;

const catalog = async (m: Merchant) =>
  Object.fromEntries(
    (await call(stack.baseUrl, 'GET', '/v1/payment_methods', { key: m.secretKey })).body.data.map(
      (x: { code: string }) => [x.code, x],
    ),
  );

describe('GET /v1/public/sessions/{code}', () => {
  it('answers 200 with the public shape: exactly its fields, never metadata', async () => {
    const m = await merchantWith();
    const s = await createSession(
      stack,
      m.secretKey,
      sessionBody({ customer: { phone: '07701234567', name: 'Zainab' }, locale: 'en', metadata: { crm: 'x-1' } }),
    );
    const methods = await catalog(m);
    const res = await m.pub('GET', `/sessions/${s.code}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.body).toEqual({
      code: s.code,
      status: 'open',
      payment_status: 'unpaid',
      reference_id: s.reference_id,
      amount: 25000,
      currency: 'IQD',
      line_items: [{ label: 'Order', amount: 25000, quantity: 1, type: 'charge' }],
      merchant: { display_name: m.name, logo_url: null, accent: null },
      methods: [
        {
          ...methods.test,
          available: true,
          unavailable_reason: null,
          presented_amount: 25000,
          presented_currency: 'IQD',
        },
        {
          ...methods.cashondelivery,
          available: true,
          unavailable_reason: null,
          presented_amount: 25000,
          presented_currency: 'IQD',
        },
      ],
      customer: { phone: '+9647701234567', phone_verified: false, name: 'Zainab', address: null },
      collect: { phone: 'required', name: 'required', shipping_address: 'none' },
      locale: 'en',
      expires_at: s.expires_at,
      cancel_url: 'https://shop.example.com/cart',
      livemode: false,
    });
    expect(res.text).not.toContain('x-1');
    expect(res.body).not.toHaveProperty('id');
  });

  it("answers 404 session_not_found for another merchant's session", async () => {
    const m = await merchantWith();
    const other = await merchantWith();
    const s = await createSession(stack, m.secretKey, sessionBody());
    expectError(await other.pub('GET', `/sessions/${s.code}`), 404, 'session_not_found');
  });

  it("answers 404 session_not_found for a session of the other mode (the merchant's live key)", async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, sessionBody());
    const live = await createCheckoutKey(stack.db, { merchantId: m.merchantId, mode: 'live', type: 'publishable' });
    expectError(await shopper(stack, live.key)('GET', `/sessions/${s.code}`), 404, 'session_not_found');
  });

  it('answers 404 session_not_found for a code that cannot be one', async () => {
    const m = await merchantWith();
    for (const code of ['abcdefgh', 'SHORT', 'A'.repeat(33), 'NOSUCHCODE12']) {
      expectError(await m.pub('GET', `/sessions/${code}`), 404, 'session_not_found');
    }
  });

  it('answers 410 session_expired for an expired session', async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, sessionBody());
    await call(stack.baseUrl, 'POST', `/v1/checkout/sessions/${s.id}/expire`, { key: m.secretKey });
    expectError(await m.pub('GET', `/sessions/${s.code}`), 410, 'session_expired');
  });

  it('answers 410 session_expired for an open session whose expires_at has passed before its timer fired', async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, sessionBody());
    stack.clock.advance(HOUR);
    try {
      expectError(await m.pub('GET', `/sessions/${s.code}`), 410, 'session_expired');
    } finally {
      stack.clock.advance(-HOUR);
    }
  });

  it('answers 410 session_canceled once the shopper canceled', async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, sessionBody());
    expect((await m.pub('POST', `/sessions/${s.code}/cancel`)).status).toBe(200);
    expectError(await m.pub('GET', `/sessions/${s.code}`), 410, 'session_canceled');
  });

  it('carries profile only with a customer token valid for this session', async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, sessionBody({ customer: { name: 'Ali' } }));
    const other = await createSession(stack, m.secretKey, sessionBody());
    const token = await verifiedToken(m, s.code);
    const otherToken = await verifiedToken(m, other.code);

    expect((await m.pub('GET', `/sessions/${s.code}`)).body).not.toHaveProperty('profile');
    expect((await m.pub('GET', `/sessions/${s.code}`, { token: otherToken })).body).not.toHaveProperty('profile');
    expect((await m.pub('GET', `/sessions/${s.code}`, { token: `${token}x` })).body).not.toHaveProperty('profile');
    const res = await m.pub('GET', `/sessions/${s.code}`, { token });
    expect(res.body.profile).toEqual({ name: 'Ali', addresses: [], instruments: [] });
  });

  it('drops profile once the customer token is 60 minutes old', async () => {
    const m = await merchantWith();
    const s = await createSession(
      stack,
      m.secretKey,
      sessionBody({ expires_at: new Date(Date.now() + 3 * HOUR).toISOString() }),
    );
    const token = await verifiedToken(m, s.code);
    stack.clock.advance(HOUR - 1000);
    try {
      expect((await m.pub('GET', `/sessions/${s.code}`, { token })).body).toHaveProperty('profile');
      stack.clock.advance(1000);
      expect((await m.pub('GET', `/sessions/${s.code}`, { token })).body).not.toHaveProperty('profile');
    } finally {
      stack.clock.advance(-HOUR);
    }
  });

  it('lists the offered methods in the order the session gives them', async () => {
    const m = await merchantWith();
    const s = await createSession(
      stack,
      m.secretKey,
      sessionBody({ payment_method_types: ['cashondelivery', 'test'] }),
    );
    const res = await m.pub('GET', `/sessions/${s.code}`);
    expect(res.body.methods.map((x: { code: string }) => x.code)).toEqual(['cashondelivery', 'test']);
  });

  it('lists card and wallets as unavailable with vendor_not_configured', async () => {
    const m = await merchantWith({ methods: ['test', 'cashondelivery', 'card', 'zaincash', 'fastpay'] });
    const s = await createSession(
      stack,
      m.secretKey,
      sessionBody({ payment_method_types: ['card', 'zaincash', 'fastpay', 'test'] }),
    );
    const res = await m.pub('GET', `/sessions/${s.code}`);
    expect(
      res.body.methods.map((x: Record<string, unknown>) => [x.code, x.enabled, x.available, x.unavailable_reason]),
    ).toEqual([
      ['card', true, false, 'vendor_not_configured'],
      ['zaincash', true, false, 'vendor_not_configured'],
      ['fastpay', true, false, 'vendor_not_configured'],
      ['test', true, true, null],
    ]);
  });

  it('lists a method the merchant disabled after the session was created as unavailable with not_enabled', async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, sessionBody());
    await setMerchantMethod(stack.db, {
      merchantId: m.merchantId,
      mode: 'test',
      code: 'cashondelivery',
      enabled: false,
    });
    const cod = (await m.pub('GET', `/sessions/${s.code}`)).body.methods[1];
    expect(cod).toMatchObject({
      code: 'cashondelivery',
      enabled: false,
      available: false,
      unavailable_reason: 'not_enabled',
    });
  });

  it('lists a method as unavailable with amount_out_of_range when the presented amount is outside its limits', async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, sessionBody({ amount: 5_000_001 }));
    const [test, cod] = (await m.pub('GET', `/sessions/${s.code}`)).body.methods;
    expect(test).toMatchObject({ available: true, unavailable_reason: null });
    expect(cod).toMatchObject({
      available: false,
      unavailable_reason: 'amount_out_of_range',
      presented_amount: 5_000_001,
      presented_currency: 'IQD',
    });
  });

  it('presents each method in the presentment currency at the session rate when the method takes it, else in the session currency', async () => {
    await setFxRate(stack.db, { from: 'IQD', to: 'USD', rate: '0.00068' }); // the rate the create tests use
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, sessionBody({ presentment: { currency: 'USD' } }));
    const [test, cod] = (await m.pub('GET', `/sessions/${s.code}`)).body.methods;
    expect(test).toMatchObject({ available: true, presented_amount: 1700, presented_currency: 'USD' });
    expect(cod).toMatchObject({ available: true, presented_amount: 25000, presented_currency: 'IQD' });
  });

  it('answers 401 invalid_publishable_key to a secret key', async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, sessionBody());
    expectError(await shopper(stack, m.secretKey)('GET', `/sessions/${s.code}`), 401, 'invalid_publishable_key');
  });

  it('answers 403 merchant_suspended on public routes of a suspended merchant', async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, sessionBody());
    await setMerchantSuspended(stack.db, m.merchantId, true);
    expectError(await m.pub('GET', `/sessions/${s.code}`), 403, 'merchant_suspended');
    await setMerchantSuspended(stack.db, m.merchantId, false);
  });
});

describe('PUT /v1/public/sessions/{code}/customer', () => {
  const address = { governorate: 'Baghdad', city: 'Baghdad', line: 'Street 14, house 3', country: 'IQ' };

  it('sets name and address with a valid customer token and answers the public session with profile', async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, sessionBody({ collect: { shipping_address: 'required' } }));
    const token = await verifiedToken(m, s.code);
    const res = await m.pub('PUT', `/sessions/${s.code}/customer`, {
      token,
      body: { name: 'Sara Ahmed', address: { ...address, geo: { lat: 33.31, lng: 44.36 } } },
    });
    expect(res.status).toBe(200);
    const stored = { ...address, landmark: null, geo: { lat: 33.31, lng: 44.36 } };
    expect(res.body.customer).toEqual({
      phone: expect.any(String),
      phone_verified: true,
      name: 'Sara Ahmed',
      address: stored,
    });
    expect(res.body.profile).toEqual({ name: 'Sara Ahmed', addresses: [stored], instruments: [] });
    const merchantView = await call(stack.baseUrl, 'GET', `/v1/checkout/sessions/${s.id}`, { key: m.secretKey });
    expect(merchantView.body.customer).toEqual({
      id: null,
      phone: res.body.customer.phone,
      name: 'Sara Ahmed',
      address: stored,
    });
  });

  it('answers 403 phone_not_verified without a valid token when the session requires a verified phone', async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, sessionBody());
    const other = await createSession(stack, m.secretKey, sessionBody());
    const otherToken = await verifiedToken(m, other.code);
    for (const token of [undefined, otherToken, 'ctok_nonsense']) {
      expectError(
        await m.pub('PUT', `/sessions/${s.code}/customer`, { token, body: { name: 'X' } }),
        403,
        'phone_not_verified',
      );
    }
  });

  it('takes details without a token when the session does not require a verified phone', async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, payableBody());
    const res = await m.pub('PUT', `/sessions/${s.code}/customer`, { body: { name: 'Omar' } });
    expect(res.status).toBe(200);
    expect(res.body.customer.name).toBe('Omar');
    expect(res.body).not.toHaveProperty('profile');
  });

  it('answers 400 validation_error for a name over 120 characters, a bad address or an empty body', async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, payableBody());
    const put = (body: unknown) => m.pub('PUT', `/sessions/${s.code}/customer`, { body });
    expectError(await put({ name: 'n'.repeat(121) }), 400, 'validation_error', [
      { field: 'name', issue: 'Too big: expected string to have <=120 characters' },
    ]);
    expectError(await put({ address: { ...address, country: 'Iraq' } }), 400, 'validation_error', [
      { field: 'address.country', issue: 'Must be a two-letter upper-case country code' },
    ]);
    expectError(await put({}), 400, 'validation_error', [{ field: '(body)', issue: 'Give name, address or both' }]);
  });

  it('answers 409 session_not_open once the session is closed', async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, payableBody());
    await call(stack.baseUrl, 'POST', `/v1/checkout/sessions/${s.id}/expire`, { key: m.secretKey });
    expectError(
      await m.pub('PUT', `/sessions/${s.code}/customer`, { body: { name: 'Omar' } }),
      409,
      'session_not_open',
    );
  });
});

describe('POST /v1/public/sessions/{code}/cancel', () => {
  it('cancels an open session with one checkout.session.canceled event and stops its workflow', async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, sessionBody());
    const res = await m.pub('POST', `/sessions/${s.code}/cancel`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ code: s.code, status: 'canceled', cancel_url: 'https://shop.example.com/cart' });
    const merchantView = await call(stack.baseUrl, 'GET', `/v1/checkout/sessions/${s.id}`, { key: m.secretKey });
    expect(merchantView.body.status).toBe('canceled');
    const events = await sessionEvents(stack.db, s.id, 'checkout.session.canceled');
    expect(events).toHaveLength(1);
    expect(events[0].data_object).toEqual(merchantView.body);
    await until(
      async () => (await stack.env.client.workflow.getHandle(s.id).describe()).status.name === 'COMPLETED',
      'the workflow to end',
    );
    expect(await stack.env.client.workflow.getHandle(s.id).result()).toBe('canceled');
    await keepHistory(stack, s.id, 'session/shopper-cancel');
  });

  it('answers 409 session_not_open for a session that is not open, and records nothing more', async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, sessionBody());
    expect((await m.pub('POST', `/sessions/${s.code}/cancel`)).status).toBe(200);
    expectError(await m.pub('POST', `/sessions/${s.code}/cancel`), 409, 'session_not_open');
    const expired = await createSession(stack, m.secretKey, sessionBody());
    await call(stack.baseUrl, 'POST', `/v1/checkout/sessions/${expired.id}/expire`, { key: m.secretKey });
    expectError(await m.pub('POST', `/sessions/${expired.code}/cancel`), 409, 'session_not_open');
    expect(await sessionEvents(stack.db, s.id, 'checkout.session.canceled')).toHaveLength(1);
    expect(await sessionEvents(stack.db, expired.id, 'checkout.session.canceled')).toHaveLength(0);
  });
});

describe('public surface limit', () => {
  it('answers 429 rate_limited with Retry-After after 300 requests per client IP in a minute, per IP', async () => {
    const m = await merchantWith();
    const windowStart = new Date(Math.floor(Date.now() / MINUTE) * MINUTE + 5 * MINUTE);
    await withFrozenClock(stack, windowStart, async () => {
      const ip = randomIp();
      for (let batch = 0; batch < 15; batch++) {
        const answers = await Promise.all(
          Array.from({ length: 20 }, () => m.pub('GET', '/sessions/NOSUCHCODE12', { ip })),
        );
        expect(answers.map((r) => r.status)).toEqual(Array(20).fill(404));
      }
      const over = await m.pub('GET', '/sessions/NOSUCHCODE12', { ip });
      expectError(over, 429, 'rate_limited');
      expect(over.headers.get('retry-after')).toBe('60');
      // Counted before the key is checked: a request without one is refused the same way.
      expectError(
        await call(stack.baseUrl, 'GET', '/v1/public/sessions/NOSUCHCODE12', { headers: { 'x-forwarded-for': ip } }),
        429,
        'rate_limited',
      );
      expect((await m.pub('GET', '/sessions/NOSUCHCODE12', { ip: randomIp() })).status).toBe(404);
      stack.clock.advance(MINUTE);
      expect((await m.pub('GET', '/sessions/NOSUCHCODE12', { ip })).status).toBe(404);
    });
  });
});
