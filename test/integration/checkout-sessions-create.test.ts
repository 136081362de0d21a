import { randomString } from '../../src/lib/ids';
import { createCheckoutKey } from '../../src/ops/checkout-keys';
import { setFxRate } from '../../src/ops/fx';
import { setMerchantMethod } from '../../src/ops/merchant-methods';
import { setMerchantSuspended } from '../../src/ops/merchants';
import { buildMerchant } from '../helpers/factories';
import { call, TestResponse } from '../helpers/http';
import { startStack, Stack } from '../helpers/stack';

/** `POST /v1/checkout/sessions`: every rule of the create body, over HTTP against the real stack. */
let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack.stop());

const MINUTE = 60 * 1000;
const HOUR = 60 * MINUTE;

/** A valid body: 2 × 22,500 + 3,000 shipping − 2,000 discount = 46,000 IQD. */
function sessionBody(over: Record<string, unknown> = {}): Record<string, any> {
  return {
    reference_id: `order-${randomString(12)}`,
    amount: 46000,
    currency: 'IQD',
    line_items: [
      { label: 'Shirt', amount: 22500, quantity: 2, type: 'charge' },
      { label: 'Delivery', amount: 3000, type: 'shipping' },
      { label: 'Coupon', amount: 2000, type: 'discount' },
    ],
    success_url: 'https://shop.example.com/orders/1/done',
    ...over,
  };
}

const create = (key: string, body: unknown) =>
  call(stack.baseUrl, 'POST', '/v1/checkout/sessions', { key, body, idempotencyKey: `idem_${randomString(16)}` });

/** Asserts status, code and exact details of an error response. */
function expectError(res: TestResponse, status: number, code: string, details: unknown[]) {
  expect({ status: res.status, code: res.body?.error?.code, details: res.body?.error?.details }).toEqual({
    status,
    code,
    details,
  });
}

/** A validation error's details: the fields, each with the validator's message. */
const invalid = (...fields: string[]) => fields.map((field) => ({ field, issue: expect.any(String) }));

let merchant: Awaited<ReturnType<typeof buildMerchant>>;
beforeAll(async () => {
  merchant = await buildMerchant(stack.db);
});

describe('the created session', () => {
  it('is open and unpaid, answered 201 with the whole session object', async () => {
    const now = new Date(Math.floor(Date.now() / 1000) * 1000 + 123);
    stack.clock.freeze(now);
    try {
      const body = sessionBody();
      const res = await create(merchant.secretKey, body);
      expect(res.status).toBe(201);
      expect(res.body).toEqual({
        id: expect.stringMatching(/^cs_test_[A-Za-z0-9]+$/),
        object: 'checkout.session',
        code: expect.stringMatching(/^[A-Z0-9]{8,32}$/),
        url: `${stack.baseUrl}/c/${res.body.code}`,
        livemode: false,
        status: 'open',
        payment_status: 'unpaid',
        reference_id: body.reference_id,
        amount: 46000,
        currency: 'IQD',
        line_items: [
          { label: 'Shirt', amount: 22500, quantity: 2, type: 'charge' },
          { label: 'Delivery', amount: 3000, quantity: 1, type: 'shipping' },
          { label: 'Coupon', amount: 2000, quantity: 1, type: 'discount' },
        ],
        payment_method_types: ['cashondelivery'],
        customer: { id: null, phone: null, name: null, address: null },
        collect: { phone: 'required', name: 'required', shipping_address: 'none' },
        presentment: null,
        payment: null,
        refunded_amount: 0,
        locale: 'ar',
        success_url: body.success_url,
        cancel_url: null,
        expires_at: new Date(now.getTime() + 60 * MINUTE).toISOString(),
        completed_at: null,
        metadata: {},
        created_at: now.toISOString(),
        updated_at: now.toISOString(),
      });
    } finally {
      stack.clock.unfreeze();
    }
  });

  it('is a live session (cs_live_, livemode true) when created with a live key', async () => {
    const live = await createCheckoutKey(stack.db, { merchantId: merchant.merchantId, mode: 'live', type: 'secret' });
    const res = await create(live.key, sessionBody());
    expect(res.status).toBe(201);
    expect(res.body.id).toMatch(/^cs_live_[A-Za-z0-9]+$/);
    expect(res.body.livemode).toBe(true);
  });

  it('shows quantity 1 on line items that were sent without one, and keeps a given quantity', async () => {
    const res = await create(
      merchant.secretKey,
      sessionBody({
        amount: 7000,
        line_items: [
          { label: 'Cap', amount: 2000, quantity: 3, type: 'charge' },
          { label: 'Wrap', amount: 1000, type: 'fee' },
        ],
      }),
    );
    expect(res.status).toBe(201);
    expect(res.body.line_items.map((i: { quantity: number }) => i.quantity)).toEqual([3, 1]);
  });

  it('keeps metadata as the string map it was given', async () => {
    const metadata = { order: 'A-1001', channel: 'app', empty: '' };
    const res = await create(merchant.secretKey, sessionBody({ metadata }));
    expect(res.status).toBe(201);
    expect(res.body.metadata).toEqual(metadata);
  });

  it('takes locale ar, ku or en, and defaults to ar', async () => {
    expect((await create(merchant.secretKey, sessionBody())).body.locale).toBe('ar');
    expect((await create(merchant.secretKey, sessionBody({ locale: 'ku' }))).body.locale).toBe('ku');
    expect((await create(merchant.secretKey, sessionBody({ locale: 'en' }))).body.locale).toBe('en');
    expectError(
      await create(merchant.secretKey, sessionBody({ locale: 'fr' })),
      400,
      'validation_error',
      invalid('locale'),
    );
  });

  it('keeps the customer name and the cancel_url', async () => {
    const res = await create(
      merchant.secretKey,
      sessionBody({ customer: { name: 'Zainab Ali' }, cancel_url: 'https://shop.example.com/cart' }),
    );
    expect(res.body.customer).toEqual({ id: null, phone: null, name: 'Zainab Ali', address: null });
    expect(res.body.cancel_url).toBe('https://shop.example.com/cart');
  });
});

describe('strict bodies', () => {
  it('refuses unknown top-level fields with one detail per field', async () => {
    const res = await create(merchant.secretKey, sessionBody({ colour: 'red', tax: 5 }));
    expectError(res, 400, 'validation_error', [
      { field: 'colour', issue: 'Unrecognized key' },
      { field: 'tax', issue: 'Unrecognized key' },
    ]);
  });

  it('refuses unknown fields inside line items, customer, collect and presentment', async () => {
    const body = sessionBody({
      customer: { name: 'A', email: 'a@example.com' },
      collect: { phone: 'optional', address: 'required' },
      presentment: { currency: 'IQD', fx_rate: 1 },
    });
    body.line_items[0].sku = 'SH-1';
    const res = await create(merchant.secretKey, body);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_error');
    expect(res.body.error.details).toEqual(
      expect.arrayContaining([
        { field: 'line_items.0.sku', issue: 'Unrecognized key' },
        { field: 'customer.email', issue: 'Unrecognized key' },
        { field: 'collect.address', issue: 'Unrecognized key' },
        { field: 'presentment.fx_rate', issue: 'Unrecognized key' },
      ]),
    );
    expect(res.body.error.details).toHaveLength(4);
  });

  it('requires reference_id, amount, currency, line_items and success_url, one detail each', async () => {
    const res = await create(merchant.secretKey, {});
    expectError(
      res,
      400,
      'validation_error',
      invalid('reference_id', 'amount', 'currency', 'line_items', 'success_url'),
    );
  });

  it('requires each line item to have a label, an amount and a type', async () => {
    const res = await create(merchant.secretKey, sessionBody({ amount: 1000, line_items: [{ quantity: 1 }] }));
    expectError(
      res,
      400,
      'validation_error',
      invalid('line_items.0.label', 'line_items.0.amount', 'line_items.0.type'),
    );
  });

  it('refuses a line item type other than charge, shipping, fee or discount', async () => {
    const body = sessionBody();
    body.line_items[1].type = 'tax';
    expectError(await create(merchant.secretKey, body), 400, 'validation_error', invalid('line_items.1.type'));
  });

  it('refuses a reference_id over 128 characters', async () => {
    const res = await create(merchant.secretKey, sessionBody({ reference_id: 'r'.repeat(129) }));
    expectError(res, 400, 'validation_error', invalid('reference_id'));
    expect((await create(merchant.secretKey, sessionBody({ reference_id: 'r'.repeat(128) }))).status).toBe(201);
  });

  it('refuses metadata that is not a string-to-string map', async () => {
    const res = await create(merchant.secretKey, sessionBody({ metadata: { order: 'A-1', count: 2, nested: {} } }));
    expectError(res, 400, 'validation_error', invalid('metadata.count', 'metadata.nested'));
    expectError(
      await create(merchant.secretKey, sessionBody({ metadata: ['a'] })),
      400,
      'validation_error',
      invalid('metadata'),
    );
  });
  it('refuses text Postgres cannot hold (U+0000, a lone surrogate) with 400 validation_error, never a 500', async () => {
    const body = sessionBody({
      reference_id: 'order\u0000-1',
      customer: { name: 'Zainab \ud800' },
      success_url: 'https://shop.example.com/\u0000',
      metadata: { note: 'a\u0000b' },
      payment_method_types: ['cash\u0000'],
    });
    body.line_items[0].label = 'Shirt\udc00';
    const res = await create(merchant.secretKey, body);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_error');
    expect(res.body.error.details.map((d: { field: string }) => d.field).sort()).toEqual(
      [
        'reference_id',
        'line_items.0.label',
        'payment_method_types.0',
        'customer.name',
        'success_url',
        'metadata.note',
      ].sort(),
    );
  });
  it('refuses an object key Postgres cannot hold with 400 validation_error naming it (U+FFFD in its place), stored and replayed', async () => {
    const cases: Array<[Record<string, unknown>, string, string]> = [
      [sessionBody({ 'x\u0000': 1 }), 'x\ufffd', 'Unrecognized key'],
      [sessionBody({ metadata: { 'k\u0000': 'v' } }), 'metadata.k\ufffd', 'Invalid key in record'],
      [
        sessionBody({ line_items: [{ label: 'A', amount: 46000, type: 'charge', 'q\ud800': 1 }] }),
        'line_items.0.q\ufffd',
        'Unrecognized key',
      ],
    ];
    for (const [body, field, issue] of cases) {
      const idempotencyKey = `idem_${randomString(16)}`;
      const send = () =>
        call(stack.baseUrl, 'POST', '/v1/checkout/sessions', { key: merchant.secretKey, body, idempotencyKey });
      const first = await send();
      expectError(first, 400, 'validation_error', [{ field, issue }]);
      const replay = await send();
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.body).toEqual(first.body);
    }
  });
});

describe('integer minor units', () => {
  it('refuses a float amount', async () => {
    const res = await create(merchant.secretKey, sessionBody({ amount: 46000.5 }));
    expectError(res, 400, 'validation_error', invalid('amount'));
  });

  it('refuses an amount sent as a string', async () => {
    const res = await create(merchant.secretKey, sessionBody({ amount: '46000' }));
    expectError(res, 400, 'validation_error', invalid('amount'));
  });

  it('refuses floats and strings in line item amounts and quantities', async () => {
    const body = sessionBody();
    body.line_items[0].amount = 22500.25;
    body.line_items[0].quantity = '2';
    body.line_items[1].amount = '3000';
    body.line_items[2].quantity = 1.5;
    const res = await create(merchant.secretKey, body);
    expectError(
      res,
      400,
      'validation_error',
      invalid('line_items.0.amount', 'line_items.0.quantity', 'line_items.1.amount', 'line_items.2.quantity'),
    );
  });

  it('refuses a zero or negative amount and a quantity below 1', async () => {
    const body = sessionBody({ amount: 0 });
    body.line_items[0].quantity = 0;
    body.line_items[1].amount = -3000;
    const res = await create(merchant.secretKey, body);
    expectError(res, 400, 'validation_error', invalid('amount', 'line_items.0.quantity', 'line_items.1.amount'));
  });
});

describe('currencies', () => {
  it('refuses a currency with no recorded minor-unit exponent with 400 unsupported_currency', async () => {
    const res = await create(merchant.secretKey, sessionBody({ currency: 'EUR' }));
    expectError(res, 400, 'unsupported_currency', [{ field: 'currency', issue: 'unsupported' }]);
  });

  it('refuses a presentment currency with no recorded minor-unit exponent with 400 unsupported_currency', async () => {
    const res = await create(merchant.secretKey, sessionBody({ presentment: { currency: 'EUR' } }));
    expectError(res, 400, 'unsupported_currency', [{ field: 'presentment.currency', issue: 'unsupported' }]);
  });

  it('refuses a currency that is not a three-letter upper-case code with 400 validation_error', async () => {
    const res = await create(merchant.secretKey, sessionBody({ currency: 'iqd', presentment: { currency: 'US' } }));
    expectError(res, 400, 'validation_error', invalid('currency', 'presentment.currency'));
  });

  it('refuses a presentment currency with no recorded FX rate with 400 unsupported_currency, issue no_fx_rate', async () => {
    const res = await create(
      merchant.secretKey,
      sessionBody({
        currency: 'USD',
        amount: 4600,
        line_items: [{ label: 'Shirt', amount: 4600, type: 'charge' }],
        presentment: { currency: 'IQD' },
      }),
    );
    expectError(res, 400, 'unsupported_currency', [{ field: 'presentment.currency', issue: 'no_fx_rate' }]);
  });

  it('records the presentment currency with the FX rate in force', async () => {
    await setFxRate(stack.db, { from: 'IQD', to: 'USD', rate: '0.00068' });
    const res = await create(merchant.secretKey, sessionBody({ presentment: { currency: 'USD' } }));
    expect(res.status).toBe(201);
    expect(res.body.presentment).toEqual({ currency: 'USD', fx_rate: 0.00068 });
  });

  it('refuses with 400 validation_error an amount whose presentment conversion is beyond 2^53 − 1 minor units', async () => {
    await setFxRate(stack.db, { from: 'USD', to: 'IQD', rate: '1310' });
    try {
      const body = (amount: number) =>
        sessionBody({
          currency: 'USD',
          amount,
          line_items: [{ label: 'Yacht', amount, type: 'charge' }],
          presentment: { currency: 'IQD' },
        });
      // 700,000,000,000,001 cents at 1310 IQD per dollar is 9,170,000,000,000,013 IQD: no exact JSON number.
      const res = await create(merchant.secretKey, body(700_000_000_000_001));
      expectError(res, 400, 'validation_error', [{ field: 'amount', issue: 'conversion_out_of_range' }]);
      expect((await create(merchant.secretKey, body(687_572_000_000_001))).status).toBe(201);
    } finally {
      // The no_fx_rate test above needs USD → IQD unrecorded.
      await stack.db('fx_rates').where({ from_currency: 'USD', to_currency: 'IQD' }).delete();
    }
  });

  it('presents in the session currency at rate 1 when presentment names it', async () => {
    const res = await create(merchant.secretKey, sessionBody({ presentment: { currency: 'IQD' } }));
    expect(res.body.presentment).toEqual({ currency: 'IQD', fx_rate: 1 });
  });

  it('takes USD amounts in cents', async () => {
    const res = await create(
      merchant.secretKey,
      sessionBody({ currency: 'USD', amount: 1999, line_items: [{ label: 'Book', amount: 1999, type: 'charge' }] }),
    );
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ amount: 1999, currency: 'USD' });
  });
});

describe('line items netting to amount', () => {
  it('refuses line items that do not net to amount with 400 amount_mismatch, issue sum_differs', async () => {
    const res = await create(merchant.secretKey, sessionBody({ amount: 46001 }));
    expectError(res, 400, 'amount_mismatch', [{ field: 'line_items', issue: 'sum_differs' }]);
  });

  it('subtracts discounts: adding one instead is a mismatch', async () => {
    const res = await create(merchant.secretKey, sessionBody({ amount: 45000 + 3000 + 2000 }));
    expectError(res, 400, 'amount_mismatch', [{ field: 'line_items', issue: 'sum_differs' }]);
  });

  it('nets exactly, where a floating-point product would round onto the amount', async () => {
    // 3,002,399,751,580,331 × 3 is 9,007,199,254,740,993, which a double rounds down to …992.
    const res = await create(
      merchant.secretKey,
      sessionBody({
        currency: 'USD',
        amount: 9_007_199_254_740_991,
        line_items: [
          { label: 'Bulk', amount: 3_002_399_751_580_331, quantity: 3, type: 'charge' },
          { label: 'Coupon', amount: 1, type: 'discount' },
        ],
      }),
    );
    expectError(res, 400, 'amount_mismatch', [{ field: 'line_items', issue: 'sum_differs' }]);
  });

  it('multiplies each line item amount by its quantity', async () => {
    const res = await create(merchant.secretKey, sessionBody({ amount: 22500 + 3000 - 2000 }));
    expectError(res, 400, 'amount_mismatch', [{ field: 'line_items', issue: 'sum_differs' }]);
  });
});

describe('customer phone', () => {
  it('keeps an E.164 phone number', async () => {
    const res = await create(merchant.secretKey, sessionBody({ customer: { phone: '+442071838750' } }));
    expect(res.status).toBe(201);
    expect(res.body.customer.phone).toBe('+442071838750');
  });

  it.each([
    '07701234567',
    '7701234567',
    '9647701234567',
    '009647701234567',
    '0770 123 4567',
    '+964 770 123-4567',
    '+964 0770 123 4567',
    '00964 0770 123 4567',
  ])('normalises the Iraqi local format %s to +9647701234567', async (phone) => {
    const res = await create(merchant.secretKey, sessionBody({ customer: { phone } }));
    expect(res.status).toBe(201);
    expect(res.body.customer.phone).toBe('+9647701234567');
  });

  it.each(['12345', '0123456789', '+0123456789', 'phone', '077012345678'])(
    'refuses %s, which is not a phone number, with 400 validation_error',
    async (phone) => {
      const res = await create(merchant.secretKey, sessionBody({ customer: { phone } }));
      expectError(res, 400, 'validation_error', invalid('customer.phone'));
    },
  );
});

describe('collect', () => {
  it('defaults to phone required, name required, shipping_address none', async () => {
    const res = await create(merchant.secretKey, sessionBody({ collect: { shipping_address: 'required' } }));
    expect(res.body.collect).toEqual({ phone: 'required', name: 'required', shipping_address: 'required' });
  });

  it('takes required, optional or none for each, and refuses anything else', async () => {
    const ok = await create(
      merchant.secretKey,
      sessionBody({ collect: { phone: 'optional', name: 'none', shipping_address: 'optional' } }),
    );
    expect(ok.body.collect).toEqual({ phone: 'optional', name: 'none', shipping_address: 'optional' });
    const bad = await create(merchant.secretKey, sessionBody({ collect: { phone: 'yes', name: true } }));
    expectError(bad, 400, 'validation_error', invalid('collect.phone', 'collect.name'));
  });
});

describe('return URLs', () => {
  it('requires https for success_url and cancel_url with 400 validation_error', async () => {
    const res = await create(
      merchant.secretKey,
      sessionBody({ success_url: 'http://shop.example.com/done', cancel_url: 'shop.example.com/cart' }),
    );
    expectError(res, 400, 'validation_error', invalid('success_url', 'cancel_url'));
  });

  it('refuses a success_url host that is not allowed with 422 return_host_not_allowed', async () => {
    const res = await create(merchant.secretKey, sessionBody({ success_url: 'https://shop.example.net/done' }));
    expectError(res, 422, 'return_host_not_allowed', [{ field: 'success_url', issue: 'host_not_allowed' }]);
  });

  it('refuses a cancel_url host that is not allowed with 422 return_host_not_allowed', async () => {
    const res = await create(merchant.secretKey, sessionBody({ cancel_url: 'https://evil.test/cart' }));
    expectError(res, 422, 'return_host_not_allowed', [{ field: 'cancel_url', issue: 'host_not_allowed' }]);
  });

  it('matches exact hosts case-insensitively, on any port and path', async () => {
    const res = await create(
      merchant.secretKey,
      sessionBody({ success_url: 'https://SHOP.Example.com:8443/a?b=c', cancel_url: 'https://shop.example.com/' }),
    );
    expect(res.status).toBe(201);
  });

  it('lets *.example.org match its sub-domains but not example.org itself', async () => {
    for (const host of ['pay.example.org', 'a.b.example.org']) {
      expect((await create(merchant.secretKey, sessionBody({ success_url: `https://${host}/ok` }))).status).toBe(201);
    }
    const apex = await create(merchant.secretKey, sessionBody({ success_url: 'https://example.org/ok' }));
    expectError(apex, 422, 'return_host_not_allowed', [{ field: 'success_url', issue: 'host_not_allowed' }]);
  });

  it.each([
    'https://shop.example.com.evil.test/done',
    'https://evilshop.example.com/done',
    'https://shop.example.com@evil.test/done',
    'https://evil.test/?next=shop.example.com',
    'https://notexample.org/done',
  ])('refuses the look-alike %s', async (url) => {
    const res = await create(merchant.secretKey, sessionBody({ success_url: url }));
    expectError(res, 422, 'return_host_not_allowed', [{ field: 'success_url', issue: 'host_not_allowed' }]);
  });
});

describe('expires_at', () => {
  const at = (now: Date, ms: number) => new Date(now.getTime() + ms).toISOString();
  const frozen = async (fn: (now: Date) => Promise<void>) => {
    const now = new Date(Math.floor(Date.now() / 1000) * 1000);
    stack.clock.freeze(now);
    try {
      await fn(now);
    } finally {
      stack.clock.unfreeze();
    }
  };
  const outOfRange = [{ field: 'expires_at', issue: 'out_of_range' }];

  it('accepts exactly 5 minutes and exactly 24 hours from now', () =>
    frozen(async (now) => {
      for (const ms of [5 * MINUTE, 24 * HOUR]) {
        const res = await create(merchant.secretKey, sessionBody({ expires_at: at(now, ms) }));
        expect(res.status).toBe(201);
        expect(res.body.expires_at).toBe(at(now, ms));
      }
    }));

  it('refuses less than 5 minutes from now with 422 expiry_out_of_range', () =>
    frozen(async (now) => {
      const res = await create(merchant.secretKey, sessionBody({ expires_at: at(now, 5 * MINUTE - 1) }));
      expectError(res, 422, 'expiry_out_of_range', outOfRange);
    }));

  it('refuses more than 24 hours from now with 422 expiry_out_of_range', () =>
    frozen(async (now) => {
      const res = await create(merchant.secretKey, sessionBody({ expires_at: at(now, 24 * HOUR + 1) }));
      expectError(res, 422, 'expiry_out_of_range', outOfRange);
    }));

  it('refuses a time in the past with 422 expiry_out_of_range', () =>
    frozen(async (now) => {
      const res = await create(merchant.secretKey, sessionBody({ expires_at: at(now, -MINUTE) }));
      expectError(res, 422, 'expiry_out_of_range', outOfRange);
    }));

  it('takes a zone offset and answers in UTC', () =>
    frozen(async (now) => {
      const utc = new Date(now.getTime() + 2 * HOUR);
      const baghdad = new Date(utc.getTime() + 3 * HOUR).toISOString().replace('Z', '+03:00');
      const res = await create(merchant.secretKey, sessionBody({ expires_at: baghdad }));
      expect(res.body.expires_at).toBe(utc.toISOString());
    }));

  it('refuses a value that is not an ISO 8601 date-time with a zone with 400 validation_error', async () => {
    for (const expires_at of ['tomorrow', '2030-01-01T10:00:00', 1893456000]) {
      expectError(
        await create(merchant.secretKey, sessionBody({ expires_at })),
        400,
        'validation_error',
        invalid('expires_at'),
      );
    }
  });
});

describe('payment methods', () => {
  const notEnabled = (...indexes: number[]) =>
    indexes.map((i) => ({ field: `payment_method_types.${i}`, issue: 'not_enabled' }));

  it('offers every enabled method except test on a test merchant when none are asked for', async () => {
    const m = await buildMerchant(stack.db, { methods: ['test', 'cashondelivery', 'card'] });
    const res = await create(m.secretKey, sessionBody());
    expect(res.body.payment_method_types).toEqual(['cashondelivery', 'card']);
  });

  it('offers test on a test merchant when asked for explicitly', async () => {
    const res = await create(merchant.secretKey, sessionBody({ payment_method_types: ['test', 'cashondelivery'] }));
    expect(res.status).toBe(201);
    expect(res.body.payment_method_types).toEqual(['test', 'cashondelivery']);
  });

  it('offers test by default in test mode on a merchant that is not a test merchant', async () => {
    const m = await buildMerchant(stack.db, { testMerchant: false });
    const res = await create(m.secretKey, sessionBody());
    expect(res.body.payment_method_types).toEqual(['test', 'cashondelivery']);
  });

  it('never offers test in live mode, and refuses it there with 422 method_not_enabled', async () => {
    const m = await buildMerchant(stack.db, { testMerchant: false });
    const live = await createCheckoutKey(stack.db, { merchantId: m.merchantId, mode: 'live', type: 'secret' });
    expect((await create(live.key, sessionBody())).body.payment_method_types).toEqual(['cashondelivery']);
    const res = await create(live.key, sessionBody({ payment_method_types: ['test'] }));
    expectError(res, 422, 'method_not_enabled', notEnabled(0));
  });

  it('refuses a method not enabled for this merchant with 422 method_not_enabled, one detail per entry', async () => {
    const res = await create(
      merchant.secretKey,
      sessionBody({ payment_method_types: ['cashondelivery', 'card', 'test', 'zaincash'] }),
    );
    expectError(res, 422, 'method_not_enabled', notEnabled(1, 3));
  });

  it('refuses an unknown method code with 422 method_not_enabled', async () => {
    const res = await create(merchant.secretKey, sessionBody({ payment_method_types: ['bitcoin'] }));
    expectError(res, 422, 'method_not_enabled', notEnabled(0));
  });

  it('refuses a method the merchant has disabled in this mode only', async () => {
    const m = await buildMerchant(stack.db);
    await setMerchantMethod(stack.db, {
      merchantId: m.merchantId,
      mode: 'test',
      code: 'cashondelivery',
      enabled: false,
    });
    const live = await createCheckoutKey(stack.db, { merchantId: m.merchantId, mode: 'live', type: 'secret' });
    const body = sessionBody({ payment_method_types: ['cashondelivery'] });
    expectError(await create(m.secretKey, body), 422, 'method_not_enabled', notEnabled(0));
    expect((await create(live.key, body)).status).toBe(201);
  });

  it('refuses with 422 method_not_enabled when no method would be offered', async () => {
    const m = await buildMerchant(stack.db, { methods: ['test'] });
    const res = await create(m.secretKey, sessionBody());
    expectError(res, 422, 'method_not_enabled', [{ field: 'payment_method_types', issue: 'none_enabled' }]);
  });

  it('lists a method asked for twice once', async () => {
    const res = await create(merchant.secretKey, sessionBody({ payment_method_types: ['test', 'test'] }));
    expect(res.body.payment_method_types).toEqual(['test']);
  });
});

describe('who may create', () => {
  it('refuses a suspended merchant with 403 merchant_suspended', async () => {
    const m = await buildMerchant(stack.db);
    await setMerchantSuspended(stack.db, m.merchantId, true);
    expectError(await create(m.secretKey, sessionBody()), 403, 'merchant_suspended', []);
  });

  it('refuses a key without sessions:write with 403 insufficient_scope', async () => {
    const m = await buildMerchant(stack.db, { scopes: ['sessions:read', 'events:read'] });
    const res = await create(m.secretKey, sessionBody());
    expectError(res, 403, 'insufficient_scope', []);
    expect(res.body.error.message).toContain('sessions:write');
  });

  it('refuses a publishable key with 401 invalid_api_key', async () => {
    expectError(await create(merchant.publishableKey, sessionBody()), 401, 'invalid_api_key', []);
  });
});
