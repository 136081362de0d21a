import { publicLimits } from '../../src/checkout/public-limits';
import { buildMerchant, buildSeller } from '../helpers/factories';
import { call } from '../helpers/http';
import { idemKey, partnerClient } from '../helpers/partner';
import { startStack, Stack } from '../helpers/stack';

/** RateLimit-Policy / RateLimit (draft-ietf-httpapi-ratelimit-headers) on every counted answer, Retry-After on 429. */
let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ PARTNER_BULK_RATE_LIMIT: '3', CHECKOUT_RATE_LIMIT_PER_SECOND: '3' });
});
afterAll(() => stack.stop());

describe('Partner bulk routes', () => {
  beforeEach(() => stack.clock.freeze(new Date(Math.ceil(Date.now() / 600_000) * 600_000 + 20_000)));
  afterEach(() => stack.clock.unfreeze());

  it('tell the ERP its quota, what remains and when the window resets, then 429 with Retry-After', async () => {
    const s = await buildSeller(stack.db);
    const api = partnerClient(stack.baseUrl, s.key);
    const remaining: Array<string | null> = [];
    for (let i = 0; i < 3; i++) {
      const res = await api.bulkInventory({ items: [{ external_sku: 'NONE', on_hand: 1 }] });
      expect(res.status).toBe(200);
      expect(res.headers.get('ratelimit-policy')).toBe('"inventory-bulk";q=3;w=600');
      remaining.push(res.headers.get('ratelimit'));
    }
    expect(remaining).toEqual([
      '"inventory-bulk";r=2;t=580',
      '"inventory-bulk";r=1;t=580',
      '"inventory-bulk";r=0;t=580',
    ]);
    const over = await api.bulkInventory({ items: [{ external_sku: 'NONE', on_hand: 1 }] });
    expect(over.status).toBe(429);
    expect(over.body.error.code).toBe('rate_limited');
    expect(over.headers.get('retry-after')).toBe('580');
    expect(over.headers.get('ratelimit')).toBe('"inventory-bulk";r=0;t=580');
    expect(over.headers.get('ratelimit-policy')).toBe('"inventory-bulk";q=3;w=600');
  });

  it('count requests, not rows: a 500-row request is one hit', async () => {
    const s = await buildSeller(stack.db);
    const api = partnerClient(stack.baseUrl, s.key);
    const items = Array.from({ length: 500 }, (_, i) => ({ external_sku: `NONE-${i}`, on_hand: 1 }));
    const res = await api.bulkInventory({ items });
    expect(res.status).toBe(200);
    expect(res.body.results).toHaveLength(500);
    expect(res.headers.get('ratelimit')).toBe('"inventory-bulk";r=2;t=580');
  });

  it('carry the headers on a refusal the limit counted (a bad body), and not on a replay it did not count', async () => {
    const s = await buildSeller(stack.db);
    const api = partnerClient(stack.baseUrl, s.key);
    const bad = await api.bulkProducts({});
    expect(bad.status).toBe(400);
    expect(bad.headers.get('ratelimit')).toBe('"products-bulk";r=2;t=580');
    const key = idemKey();
    expect((await api.bulkProducts({ items: [{}] }, key)).headers.get('ratelimit')).toBe('"products-bulk";r=1;t=580');
    const replay = await api.bulkProducts({ items: [{}] }, key);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.headers.get('ratelimit')).toBeNull();
  });

  it('are absent where no limit counts (reads, adjustments)', async () => {
    const s = await buildSeller(stack.db);
    const res = await partnerClient(stack.baseUrl, s.key).get('/products');
    expect(res.status).toBe(200);
    expect(res.headers.get('ratelimit')).toBeNull();
    expect(res.headers.get('ratelimit-policy')).toBeNull();
  });
});

describe('Checkout routes', () => {
  beforeEach(() => stack.clock.freeze(new Date(Math.ceil(Date.now() / 60_000) * 60_000 + 100)));
  afterEach(() => stack.clock.unfreeze());

  it('merchant routes count per key per second, and 429 carries Retry-After', async () => {
    const m = await buildMerchant(stack.db);
    const seen = [];
    for (let i = 0; i < 4; i++) {
      const res = await call(stack.baseUrl, 'GET', '/v1/payment_methods', { key: m.secretKey });
      seen.push([res.status, res.headers.get('ratelimit-policy'), res.headers.get('ratelimit')]);
    }
    expect(seen).toEqual([
      [200, '"merchant";q=3;w=1', '"merchant";r=2;t=1'],
      [200, '"merchant";q=3;w=1', '"merchant";r=1;t=1'],
      [200, '"merchant";q=3;w=1', '"merchant";r=0;t=1'],
      [429, '"merchant";q=3;w=1', '"merchant";r=0;t=1'],
    ]);
    const over = await call(stack.baseUrl, 'GET', '/v1/payment_methods', { key: m.secretKey });
    expect(over.headers.get('retry-after')).toBe('1');
  });

  it('public routes count per client IP', async () => {
    const m = await buildMerchant(stack.db);
    const ip = `10.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}.9`;
    const res = await call(stack.baseUrl, 'GET', '/v1/public/sessions/NOSUCHCODE1', {
      key: m.publishableKey,
      headers: { 'x-forwarded-for': ip },
    });
    expect(res.status).toBe(404);
    const { limit, windowSeconds } = publicLimits.perIp;
    expect(res.headers.get('ratelimit-policy')).toBe(`"public-ip";q=${limit};w=${windowSeconds}`);
    expect(res.headers.get('ratelimit')).toBe(`"public-ip";r=${limit - 1};t=60`);
  });
});
