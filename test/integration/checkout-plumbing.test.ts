import Koa from 'koa';
import { z } from 'zod';
import { checkoutStack } from '../../src/app';
import { checkoutRouter } from '../../src/checkout/routes';
import { publishableKeyAuth, secretKeyAuth } from '../../src/http/checkout-auth';
import { renderCheckoutError } from '../../src/http/error-envelope';
import { checkoutIdempotency } from '../../src/http/idempotency';
import { validate } from '../../src/http/validate';
import { createCheckoutKey, revokeCheckoutKey } from '../../src/ops/checkout-keys';
import { setMerchantSuspended } from '../../src/ops/merchants';
import { buildMerchant, buildSeller } from '../helpers/factories';
import { call } from '../helpers/http';
import { listen, startStack, Stack } from '../helpers/stack';

/**
 * The shared Checkout plumbing over HTTP: the real `/v1` stack with the real payment-methods
 * route, plus probe routes for a creating POST (idempotency) and a public route.
 */
let stack: Stack;
let probe: { baseUrl: string; close(): Promise<void> };
const executions = new Map<string, number>();

const probeBody = z.strictObject({
  tag: z.string(),
  amount: z.number().int(),
  delay_ms: z.number().optional(),
  crash: z.boolean().optional(),
});

function probeApp(deps: Stack['deps']): Koa {
  const settings = { ...deps.settings, CHECKOUT_RATE_LIMIT_PER_SECOND: 5 };
  const router = checkoutRouter({ ...deps, settings }); // the real routes, plus the probes below
  for (const route of ['probe-create', 'probe-other']) {
    router.post(
      `/${route}`,
      secretKeyAuth(deps.db, deps.clock, settings.CHECKOUT_RATE_LIMIT_PER_SECOND)('sessions:write'),
      checkoutIdempotency(deps.db, deps.clock, route, renderCheckoutError),
      validate({ body: probeBody }),
      async (ctx) => {
        const body = ctx.state.input.body as z.infer<typeof probeBody>;
        const n = (executions.get(body.tag) ?? 0) + 1;
        executions.set(body.tag, n);
        if (body.delay_ms) await new Promise((r) => setTimeout(r, body.delay_ms));
        if (body.crash) throw new Error('boom');
        ctx.status = 201;
        ctx.body = { tag: body.tag, execution: n };
      },
    );
  }
  router.get('/public/probe', publishableKeyAuth(deps.db, deps.clock), (ctx) => {
    ctx.body = { merchant_id: ctx.state.checkout.merchantId, mode: ctx.state.checkout.mode };
  });
  const app = new Koa();
  app.silent = true;
  app.use(checkoutStack({ ...deps, settings }, router));
  return app;
}

beforeAll(async () => {
  stack = await startStack();
  probe = await listen(probeApp(stack.deps));
});
afterAll(async () => {
  await probe.close();
  await stack.stop();
});

const tag = () => `t${Math.random().toString(36).slice(2)}`;
const idem = () => `idem_${Math.random().toString(36).slice(2)}`;
const methods = (key?: string, headers: Record<string, string> = {}) =>
  call(probe.baseUrl, 'GET', '/v1/payment_methods', { key, headers });
const create = (key: string, idempotencyKey: string | undefined, body: unknown, route = 'probe-create') =>
  call(probe.baseUrl, 'POST', `/v1/${route}`, { key, idempotencyKey, body });

describe('Checkout request ids', () => {
  it('uses a valid x-request-id and echoes it on success and on errors', async () => {
    const m = await buildMerchant(stack.db);
    const ok = await methods(m.secretKey, { 'x-request-id': 'order-123_ABC-xyz' });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('x-request-id')).toBe('order-123_ABC-xyz');
    const err = await methods(undefined, { 'x-request-id': 'order-123_ABC-xyz' });
    expect(err.headers.get('x-request-id')).toBe('order-123_ABC-xyz');
    expect(err.body.error.request_id).toBe('order-123_ABC-xyz');
  });

  it.each([
    ['7 characters', 'abcdefg'],
    ['65 characters', 'a'.repeat(65)],
    ['a character outside A-Za-z0-9_-', 'abc.def.ghi'],
  ])('replaces an x-request-id of %s with a generated req_ id', async (_label, sent) => {
    const res = await methods(undefined, { 'x-request-id': sent });
    const id = res.headers.get('x-request-id');
    expect(id).toMatch(/^req_[A-Za-z0-9]+$/);
    expect(res.body.error.request_id).toBe(id);
  });

  it('echoes the request id on the public routes too, on success and on errors', async () => {
    const m = await buildMerchant(stack.db);
    const headers = { 'x-request-id': 'hosted-page-0001' };
    const ok = await call(probe.baseUrl, 'GET', '/v1/public/probe', { key: m.publishableKey, headers });
    expect(ok.headers.get('x-request-id')).toBe('hosted-page-0001');
    const missing = await call(probe.baseUrl, 'GET', '/v1/public/sessions/NOSUCHCODE1', {
      key: m.publishableKey,
      headers,
    });
    expect(missing.status).toBe(404);
    expect(missing.headers.get('x-request-id')).toBe('hosted-page-0001');
    expect(missing.body.error).toMatchObject({
      code: 'session_not_found',
      details: [],
      request_id: 'hosted-page-0001',
    });
  });

  it('accepts 8 and 64 characters', async () => {
    for (const sent of ['a'.repeat(8), 'b'.repeat(64)]) {
      expect((await methods(undefined, { 'x-request-id': sent })).headers.get('x-request-id')).toBe(sent);
    }
  });
});

describe('Checkout error envelope', () => {
  it('always carries details, empty when there is nothing to point at', async () => {
    const res = await methods();
    expect(res.status).toBe(401);
    expect(res.body).toEqual({
      error: {
        code: 'invalid_api_key',
        message: expect.any(String),
        details: [],
        request_id: expect.stringMatching(/^req_/),
      },
    });
  });

  it('lists one detail per problem with a dotted field, unknown fields included', async () => {
    const m = await buildMerchant(stack.db);
    const res = await create(m.secretKey, idem(), { tag: 'x', amount: 1.5, colour: 'red', size: 2 });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_error');
    expect(res.body.error.details).toEqual(
      expect.arrayContaining([
        { field: 'amount', issue: expect.any(String) },
        { field: 'colour', issue: 'Unrecognized key' },
        { field: 'size', issue: 'Unrecognized key' },
      ]),
    );
    expect(res.body.error.details).toHaveLength(3);
  });

  it('answers malformed JSON with 400 validation_error in the envelope, field (body)', async () => {
    const m = await buildMerchant(stack.db);
    const res = await call(probe.baseUrl, 'POST', '/v1/probe-create', {
      key: m.secretKey,
      idempotencyKey: idem(),
      rawBody: '{"tag":',
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({
      code: 'validation_error',
      details: [{ field: '(body)', issue: 'invalid_json' }],
    });
  });

  it('answers a body over 100 KB with 413 in the envelope', async () => {
    const m = await buildMerchant(stack.db);
    const rawBody = JSON.stringify({ tag: 'x'.repeat(101 * 1024), amount: 1 });
    const res = await call(probe.baseUrl, 'POST', '/v1/probe-create', {
      key: m.secretKey,
      idempotencyKey: idem(),
      rawBody,
    });
    expect(res.status).toBe(413);
    expect(res.body.error).toMatchObject({
      code: 'request_too_large',
      details: [{ field: '(body)', issue: 'too_large' }],
    });
  });
});

describe('Checkout bodies that downstream code could not hold', () => {
  const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);

  it('refuses a body nested deeper than 32 levels with 400 validation_error, and takes 32', async () => {
    const m = await buildMerchant(stack.db);
    const deep = await call(probe.baseUrl, 'POST', '/v1/probe-create', {
      key: m.secretKey,
      idempotencyKey: idem(),
      rawBody: `{"tag":"x","amount":1,"deep":${nested(40_000)}}`,
    });
    expect(deep.status).toBe(400);
    expect(deep.body.error).toMatchObject({
      code: 'validation_error',
      details: [{ field: '(body)', issue: 'too_deep' }],
    });
    const ok = await call(probe.baseUrl, 'POST', '/v1/probe-create', {
      key: m.secretKey,
      idempotencyKey: idem(),
      rawBody: `{"tag":"x","amount":1,"deep":${nested(31)}}`,
    });
    expect(ok.status).toBe(400);
    expect(ok.body.error.details).toEqual([{ field: 'deep', issue: 'Unrecognized key' }]);
  });

  it('echoes an unknown key holding U+0000 as U+FFFD, so the refusal is stored and replayed', async () => {
    const m = await buildMerchant(stack.db);
    const key = idem();
    const rawBody = '{"tag":"x","amount":1,"a\\u0000b":1}';
    const first = await call(probe.baseUrl, 'POST', '/v1/probe-create', {
      key: m.secretKey,
      idempotencyKey: key,
      rawBody,
    });
    expect(first.status).toBe(400);
    expect(first.body.error.details).toEqual([{ field: 'a\ufffdb', issue: 'Unrecognized key' }]);
    const replay = await call(probe.baseUrl, 'POST', '/v1/probe-create', {
      key: m.secretKey,
      idempotencyKey: key,
      rawBody,
    });
    expect(replay.status).toBe(400);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
  });
});

describe('Checkout keys', () => {
  it('refuses a publishable key on a merchant route with 401 invalid_api_key', async () => {
    const m = await buildMerchant(stack.db);
    const res = await methods(m.publishableKey);
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('invalid_api_key');
  });

  it('refuses a secret key, a Partner key or garbage on a public route with 401 invalid_publishable_key', async () => {
    const m = await buildMerchant(stack.db);
    const seller = await buildSeller(stack.db);
    for (const key of [m.secretKey, seller.key, 'svc_pk_test_nonsense', undefined]) {
      const res = await call(probe.baseUrl, 'GET', '/v1/public/probe', { key });
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('invalid_publishable_key');
    }
  });

  it('accepts a publishable key on a public route with its merchant and mode', async () => {
    const m = await buildMerchant(stack.db);
    const res = await call(probe.baseUrl, 'GET', '/v1/public/probe', { key: m.publishableKey });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ merchant_id: m.merchantId, mode: 'test' });
  });

  it('makes revocation effective on the next request', async () => {
    const m = await buildMerchant(stack.db);
    expect((await methods(m.secretKey)).status).toBe(200);
    await revokeCheckoutKey(stack.db, m.secretKeyId);
    const res = await methods(m.secretKey);
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('invalid_api_key');
  });

  it('answers 403 insufficient_scope naming the missing scope', async () => {
    const m = await buildMerchant(stack.db, { scopes: ['sessions:write'] });
    const res = await methods(m.secretKey);
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('insufficient_scope');
    expect(res.body.error.message).toContain('sessions:read');
  });

  it('answers 403 merchant_suspended to a suspended merchant, on merchant and public routes', async () => {
    const m = await buildMerchant(stack.db);
    await setMerchantSuspended(stack.db, m.merchantId, true);
    expect((await methods(m.secretKey)).body.error.code).toBe('merchant_suspended');
    const pub = await call(probe.baseUrl, 'GET', '/v1/public/probe', { key: m.publishableKey });
    expect(pub.status).toBe(403);
    expect(pub.body.error.code).toBe('merchant_suspended');
    await setMerchantSuspended(stack.db, m.merchantId, false);
    expect((await methods(m.secretKey)).status).toBe(200);
  });

  it('takes the mode from the key: the test method is listed in test mode only', async () => {
    const m = await buildMerchant(stack.db);
    const live = await createCheckoutKey(stack.db, { merchantId: m.merchantId, mode: 'live', type: 'secret' });
    const testCodes = (await methods(m.secretKey)).body.data.map((x: { code: string }) => x.code);
    const liveCodes = (await methods(live.key)).body.data.map((x: { code: string }) => x.code);
    expect(testCodes).toContain('test');
    expect(liveCodes).not.toContain('test');
    expect(liveCodes).toContain('cashondelivery');
  });
});

describe('Checkout idempotency', () => {
  it.each([
    ['missing', undefined],
    ['7 characters', 'abcdefg'],
    ['129 characters', 'a'.repeat(129)],
    ['a character outside A-Za-z0-9_-', 'abc def ghi'],
  ])('refuses an Idempotency-Key that is %s with 400 idempotency_key_required', async (_label, key) => {
    const m = await buildMerchant(stack.db);
    const res = await create(m.secretKey, key, { tag: tag(), amount: 1 });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('idempotency_key_required');
  });

  it('replays the first response with the same status and Idempotent-Replayed: true', async () => {
    const m = await buildMerchant(stack.db);
    const key = idem();
    const t = tag();
    const first = await create(m.secretKey, key, { tag: t, amount: 1 });
    const second = await create(m.secretKey, key, { amount: 1, tag: t });
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(second.status).toBe(201);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.body).toEqual(first.body);
    expect(executions.get(t)).toBe(1);
  });

  it('answers 409 idempotency_key_conflict for another body', async () => {
    const m = await buildMerchant(stack.db);
    const key = idem();
    await create(m.secretKey, key, { tag: tag(), amount: 1 });
    const res = await create(m.secretKey, key, { tag: tag(), amount: 2 });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('idempotency_key_conflict');
  });

  it('answers 409 idempotency_key_conflict for another route', async () => {
    const m = await buildMerchant(stack.db);
    const key = idem();
    const t = tag();
    await create(m.secretKey, key, { tag: t, amount: 1 });
    const res = await create(m.secretKey, key, { tag: t, amount: 1 }, 'probe-other');
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('idempotency_key_conflict');
  });

  it('processes a key again while its first request is still in flight, and stores the newer response', async () => {
    const m = await buildMerchant(stack.db);
    const key = idem();
    const t = tag();
    const body = { tag: t, amount: 1, delay_ms: 400 };
    const first = create(m.secretKey, key, body);
    await new Promise((r) => setTimeout(r, 150));
    const second = await create(m.secretKey, key, body);
    expect((await first).status).toBe(201);
    expect(second.status).toBe(201);
    expect(executions.get(t)).toBe(2);
    const replay = await create(m.secretKey, key, body);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body).toEqual({ tag: t, execution: 2 }); // the second finished last: its response is the newer one
  });

  it('processes a key again after a 5xx, which is not stored', async () => {
    const m = await buildMerchant(stack.db);
    const key = idem();
    const t = tag();
    expect((await create(m.secretKey, key, { tag: t, amount: 1, crash: true })).status).toBe(500);
    expect((await create(m.secretKey, key, { tag: t, amount: 1, crash: true })).status).toBe(500);
    expect(executions.get(t)).toBe(2);
  });

  it('scopes keys to merchant and mode', async () => {
    const a = await buildMerchant(stack.db);
    const b = await buildMerchant(stack.db);
    const aLive = await createCheckoutKey(stack.db, { merchantId: a.merchantId, mode: 'live', type: 'secret' });
    const key = idem();
    const t = tag();
    for (const secret of [a.secretKey, aLive.key, b.secretKey]) {
      const res = await create(secret, key, { tag: t, amount: 1 });
      expect(res.status).toBe(201);
      expect(res.headers.get('idempotent-replayed')).toBeNull();
    }
    expect(executions.get(t)).toBe(3);
  });

  it('forgets a stored response after 24 hours', async () => {
    const m = await buildMerchant(stack.db);
    const key = idem();
    await create(m.secretKey, key, { tag: tag(), amount: 1 });
    stack.clock.advance(24 * 60 * 60 * 1000 + 1000);
    try {
      const res = await create(m.secretKey, key, { tag: tag(), amount: 2 });
      expect(res.status).toBe(201);
      expect(res.headers.get('idempotent-replayed')).toBeNull();
    } finally {
      stack.clock.advance(-(24 * 60 * 60 * 1000 + 1000));
    }
  });
});

describe('Checkout merchant rate limit (per key, per second)', () => {
  beforeEach(() => stack.clock.freeze(new Date(Math.ceil(Date.now() / 1000) * 1000 + 100)));
  afterEach(() => stack.clock.unfreeze());

  it('answers over the limit with 429 rate_limited and Retry-After, per key', async () => {
    const m = await buildMerchant(stack.db);
    const other = await buildMerchant(stack.db);
    for (let i = 0; i < 5; i++) expect((await methods(m.secretKey)).status).toBe(200);
    const res = await methods(m.secretKey);
    expect(res.status).toBe(429);
    expect(res.body.error.code).toBe('rate_limited');
    expect(res.headers.get('retry-after')).toBe('1');
    expect((await methods(other.secretKey)).status).toBe(200);
    stack.clock.advance(1000);
    expect((await methods(m.secretKey)).status).toBe(200);
  });
});
