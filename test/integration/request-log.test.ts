import { captureLogs, log } from '../../src/lib/log';
import { buildMerchant, buildSeller } from '../helpers/factories';
import { partnerClient } from '../helpers/partner';
import { createSession, randomPhone, sessionBody, shopper, smsCode } from '../helpers/checkout-payments';
import { startStack, Stack } from '../helpers/stack';

/**
 * The log as on-call reads it: one `request` line per request (method, route template, status,
 * duration, request id, who called), nothing secret in any line (keys, OTP codes, phone numbers,
 * customer tokens, bodies), and errors with the cause Postgres or Temporal gave.
 */
let stack: Stack;
let lines: string[] = [];
let restore: () => void;
beforeAll(async () => {
  stack = await startStack();
  restore = captureLogs({ write: (line: string) => void lines.push(line) });
});
afterAll(async () => {
  restore();
  await stack.stop();
});
beforeEach(() => {
  lines = [];
});

const parsed = () => lines.map((line) => JSON.parse(line) as Record<string, unknown>);
const requestLines = () => parsed().filter((l) => l.msg === 'request');

describe('the request line', () => {
  it('names the method, route template, status, duration, request id, merchant and key of a Checkout call', async () => {
    const m = await buildMerchant(stack.db);
    const s = await createSession(stack, m.secretKey, sessionBody());
    const read = await fetch(`${stack.baseUrl}/v1/checkout/sessions/${s.id}`, {
      headers: { authorization: `Bearer ${m.secretKey}`, 'x-request-id': 'req_log_test_0001' },
    });
    expect(read.status).toBe(200);
    const [create, get] = requestLines();
    expect(create).toEqual({
      level: 'info',
      time: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      msg: 'request',
      method: 'POST',
      route: '/v1/checkout/sessions',
      status: 201,
      duration_ms: expect.any(Number),
      request_id: expect.stringMatching(/^req_/),
      merchant_id: m.merchantId,
      key_id: m.secretKeyId,
    });
    expect(get).toEqual(
      expect.objectContaining({
        method: 'GET',
        route: '/v1/checkout/sessions/:id',
        status: 200,
        request_id: 'req_log_test_0001',
        merchant_id: m.merchantId,
      }),
    );
    expect(JSON.stringify(get)).not.toContain(s.id); // the template, never the path
  });

  it('names the seller and key of a Partner call, and a route no router matched as unmatched', async () => {
    const seller = await buildSeller(stack.db);
    expect((await partnerClient(stack.baseUrl, seller.key).get('/products')).status).toBe(200);
    expect((await fetch(`${stack.baseUrl}/v1/nowhere`)).status).toBe(404);
    const [products, nowhere] = requestLines();
    expect(products).toEqual(
      expect.objectContaining({
        method: 'GET',
        route: '/partner/v1/products',
        status: 200,
        seller_id: seller.seller_id,
        key_id: seller.keyId,
      }),
    );
    expect(nowhere).toEqual(expect.objectContaining({ method: 'GET', route: 'unmatched', status: 404 }));
  });

  it('never carries a key, an OTP code, a phone number, a customer token or a body', async () => {
    const m = await buildMerchant(stack.db);
    const s = await createSession(stack, m.secretKey, sessionBody());
    const pub = shopper(stack, m.publishableKey);
    const phone = randomPhone();
    expect((await pub('POST', `/sessions/${s.code}/otp`, { body: { phone } })).status).toBe(202);
    const code = (await smsCode(stack.db, phone))!;
    const verified = await pub('POST', `/sessions/${s.code}/otp/verify`, { body: { phone, code } });
    expect(verified.status).toBe(200);
    // A caller that hands the logger secret-shaped fields by mistake still writes none of them.
    log.warn('careless', { phone, secret: m.secretKey, nested: { customer_token: verified.body.customer_token } });

    expect(requestLines().map((l) => l.route)).toEqual([
      '/v1/checkout/sessions',
      '/v1/public/sessions/:code/otp',
      '/v1/public/sessions/:code/otp/verify',
    ]);
    const all = lines.join('');
    for (const secret of [m.secretKey, m.publishableKey, phone, phone.slice(4), code, verified.body.customer_token])
      expect(all).not.toContain(secret);
    expect(all).not.toContain(s.code);
    expect(parsed().find((l) => l.msg === 'careless')).toEqual(
      expect.objectContaining({ phone: '[redacted]', secret: '[redacted]', nested: { customer_token: '[redacted]' } }),
    );
  });

  it('writes the line of a health probe at debug, so load balancers do not flood the log', async () => {
    expect((await fetch(`${stack.baseUrl}/partner/v1/health`)).status).toBe(200);
    expect(requestLines()).toEqual([
      expect.objectContaining({ level: 'debug', route: '/partner/v1/health', status: 200 }),
    ]);
  });
});

describe('an error line', () => {
  it('gives the SQLSTATE of a Postgres error and the gRPC status and message of a Temporal one', async () => {
    const pgError = await stack.db.raw('SELECT 1/0').catch((err: unknown) => err);
    const temporalError = await stack.env.client.workflow
      .start('noSuchWorkflow', {
        taskQueue: stack.taskQueue,
        workflowId: `log-test-${Date.now()}`,
        searchAttributes: { NoSuchAttribute: ['x'] },
      })
      .catch((err: unknown) => err);
    log.error('postgres failed', { error: pgError });
    log.error('temporal failed', { error: temporalError });
    const [pg, temporal] = parsed();
    expect(pg.error).toEqual(
      expect.objectContaining({ sqlstate: '22012', message: expect.stringContaining('division') }),
    );
    expect(temporal.error).toEqual(
      expect.objectContaining({
        grpc_status: 'INVALID_ARGUMENT',
        grpc_message: expect.stringContaining('NoSuchAttribute'),
      }),
    );
  });
});
