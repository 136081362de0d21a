import { randomString } from '../../src/lib/ids';
import { buildMerchant } from '../helpers/factories';
import { call, TestResponse } from '../helpers/http';
import { shopper, until } from '../helpers/checkout-payments';
import { startStack, Stack } from '../helpers/stack';

/**
 * A test-mode journey over the HTTP APIs only, as a merchant's server and a shopper's browser would
 * drive them: create, verify the phone, give the details, pay on the test gateway, come back, then
 * refund part and then the rest. No database reads, no direct service calls.
 */
let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack.stop());

it('takes a test-mode session from create to paid to partially refunded to refunded', async () => {
  const m = await buildMerchant(stack.db);
  const merchant = (method: string, path: string, body?: unknown, idempotencyKey?: string) =>
    call(stack.baseUrl, method, `/v1${path}`, { key: m.secretKey, body, idempotencyKey });
  const browser = shopper(stack, m.publishableKey);
  const expectStatus = (res: TestResponse, status: number) =>
    expect({ status: res.status, body: res.body }).toMatchObject({ status });

  // The merchant's server: the methods it may offer, then a session for order 1042.
  const methods = await merchant('GET', '/payment_methods');
  expect(methods.body.data.find((x: { code: string }) => x.code === 'test')).toMatchObject({ enabled: true });
  const created = await merchant(
    'POST',
    '/checkout/sessions',
    {
      reference_id: 'order-1042',
      amount: 36000,
      currency: 'IQD',
      line_items: [
        { label: 'Headphones', amount: 33000, type: 'charge' },
        { label: 'Delivery', amount: 3000, type: 'shipping' },
      ],
      payment_method_types: ['test', 'cashondelivery'],
      collect: { phone: 'required', name: 'required', shipping_address: 'required' },
      success_url: 'https://shop.example.com/orders/1042/thanks',
      cancel_url: 'https://shop.example.com/cart',
      metadata: { cart: 'c-77' },
    },
    `idem_${randomString(16)}`,
  );
  expectStatus(created, 201);
  const session = created.body;
  const code = new URL(session.url).pathname.split('/').pop()!;

  // The shopper opens the hosted page.
  const page = await browser('GET', `/sessions/${code}`);
  expectStatus(page, 200);
  expect(page.body.methods.map((x: { code: string; available: boolean }) => [x.code, x.available])).toEqual([
    ['test', true],
    ['cashondelivery', true],
  ]);
  expect(page.body).not.toHaveProperty('metadata');

  // Paying before verifying the phone is refused; the test phone gets 000000 and no SMS.
  expect((await browser('POST', `/sessions/${code}/attempts`, { body: { method: 'test' } })).body.error.code).toBe(
    'phone_not_verified',
  );
  const otp = await browser('POST', `/sessions/${code}/otp`, { body: { phone: stack.settings.TEST_PHONE } });
  expect(otp.status).toBe(202);
  expect(otp.body).toEqual({ sent: false, retry_after: 60 });
  const verified = await browser('POST', `/sessions/${code}/otp/verify`, {
    body: { phone: stack.settings.TEST_PHONE, code: '000000' },
  });
  expectStatus(verified, 200);
  const token = verified.body.customer_token;

  // Name and address, then the test gateway.
  const details = await browser('PUT', `/sessions/${code}/customer`, {
    token,
    body: {
      name: 'Noor Hassan',
      address: {
        governorate: 'Basra',
        city: 'Basra',
        line: 'Al-Jazair St. 12',
        landmark: 'near the mosque',
        country: 'IQ',
      },
    },
  });
  expectStatus(details, 200);
  expect(details.body.customer).toMatchObject({
    phone: stack.settings.TEST_PHONE,
    phone_verified: true,
    name: 'Noor Hassan',
  });
  const attempt = await browser('POST', `/sessions/${code}/attempts`, { token, body: { method: 'test' } });
  expectStatus(attempt, 201);
  expect(attempt.body).toMatchObject({ kind: 'redirect', status: 'pending', session_status: 'processing' });
  const attemptId = attempt.body.attempt_id;
  expect(attempt.body.redirect_url).toBe(`${stack.settings.PUBLIC_BASE_URL}/t/${attemptId}`);

  // On the simulated vendor's page: Succeed, which sends the shopper to the return page.
  const vendorPage = await browser('GET', `/test-gateway/${attemptId}`);
  expect(vendorPage.body).toMatchObject({ amount: 36000, currency: 'IQD', status: 'pending' });
  const decided = await browser('POST', `/test-gateway/${attemptId}/decide`, { body: { decision: 'succeeded' } });
  expectStatus(decided, 200);
  expect(decided.body.return_url).toBe(`${stack.settings.PUBLIC_BASE_URL}/r/${attemptId}`);

  // The return page (perhaps in another browser) polls until it can send the shopper on.
  let returned: TestResponse | undefined;
  await until(async () => {
    returned = await browser('GET', `/attempts/${attemptId}`);
    return returned.body.status !== 'pending';
  }, 'the payment outcome');
  expect(returned!.body).toMatchObject({ status: 'succeeded', session_status: 'completed', payment_status: 'paid' });
  const redirect = new URL(returned!.body.redirect_to);
  expect(`${redirect.origin}${redirect.pathname}`).toBe('https://shop.example.com/orders/1042/thanks');
  expect(Object.fromEntries(redirect.searchParams)).toEqual({ session_id: session.id, reference_id: 'order-1042' });

  // The merchant's server reads the session (the only authority) and matches its order.
  const paid = (await merchant('GET', `/checkout/sessions/${redirect.searchParams.get('session_id')}`)).body;
  expect(paid).toMatchObject({
    reference_id: 'order-1042',
    status: 'completed',
    payment_status: 'paid',
    refunded_amount: 0,
    customer: { phone: stack.settings.TEST_PHONE, name: 'Noor Hassan' },
    payment: { attempt_id: attemptId, method: 'test', captured_amount: 36000, captured_currency: 'IQD' },
  });
  const completedEvents = (await merchant('GET', '/events?type=checkout.session.completed')).body.data;
  expect(completedEvents.map((e: { data: { object: { id: string } } }) => e.data.object.id)).toEqual([session.id]);

  // The headphones come back: a partial refund, then the rest.
  const settle = async (refundId: string) => {
    let current: TestResponse | undefined;
    await until(async () => {
      current = await merchant('GET', `/refunds/${refundId}`);
      return current.body.status !== 'requested';
    }, 'the refund');
    return current!.body;
  };
  const partial = await merchant(
    'POST',
    '/refunds',
    { session_id: session.id, amount: 33000, reason: 'returned' },
    `idem_${randomString(16)}`,
  );
  expectStatus(partial, 201);
  expect(partial.body).toMatchObject({ status: 'requested', amount: 33000, currency: 'IQD' });
  expect(await settle(partial.body.id)).toMatchObject({ status: 'succeeded' });
  expect((await merchant('GET', `/checkout/sessions/${session.id}`)).body).toMatchObject({
    payment_status: 'partially_refunded',
    refunded_amount: 33000,
  });

  const tooMuch = await merchant(
    'POST',
    '/refunds',
    { session_id: session.id, amount: 3001 },
    `idem_${randomString(16)}`,
  );
  expect(tooMuch.status).toBe(409);
  expect(tooMuch.body.error).toMatchObject({
    code: 'refund_exceeds_captured',
    message: 'The refund exceeds what remains captured: 3000 IQD remains refundable.',
  });
  const rest = await merchant(
    'POST',
    '/refunds',
    { session_id: session.id, amount: 3000, reason: 'delivery fee' },
    `idem_${randomString(16)}`,
  );
  expect(await settle(rest.body.id)).toMatchObject({ status: 'succeeded' });
  expect((await merchant('GET', `/checkout/sessions/${session.id}`)).body).toMatchObject({
    status: 'completed',
    payment_status: 'refunded',
    refunded_amount: 36000,
  });
  const refunds = (await merchant('GET', `/refunds?session_id=${session.id}`)).body.data;
  expect(refunds.map((r: { id: string; status: string }) => [r.id, r.status])).toEqual([
    [rest.body.id, 'succeeded'],
    [partial.body.id, 'succeeded'],
  ]);
  const refundEvents = (await merchant('GET', '/events?type=refund.succeeded')).body.data;
  expect(refundEvents.map((e: { data: { object: { id: string } } }) => e.data.object.id)).toEqual([
    rest.body.id,
    partial.body.id,
  ]);
});
