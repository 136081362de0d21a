import Koa from 'koa';
import Router from '@koa/router';
import { partnerStack } from '../../src/app';
import { partnerChainDeps } from '../../src/deps';
import { loadSettings } from '../../src/config';
import { ApiError } from '../../src/http/errors';
import { partnerChain } from '../../src/http/partner-chain';
import { canonicalJson, sha256Hex } from '../../src/lib/hash';
import { revokePartnerKey, setPartnerKeyScopes } from '../../src/ops/partner-keys';
import { buildSeller } from '../helpers/factories';
import { call } from '../helpers/http';
import { listen, startStack, Stack } from '../helpers/stack';

/**
 * The shared Partner plumbing, driven over HTTP through the real middleware stack and Postgres.
 * Probe routes stand in for the catalog routes: a read with catalog:read, and a bulk write with
 * idempotency and the bulk rate limit, whose handler counts its executions.
 */
let stack: Stack;
let probe: { baseUrl: string; close(): Promise<void> };
let liveProbe: { baseUrl: string; close(): Promise<void> };
const executions = new Map<string, number>();

function probeRouter(deps: Stack['deps']): Router {
  const chain = partnerChainDeps(deps);
  const router = new Router({ prefix: '/partner/v1' });
  router.get('/probe', ...partnerChain(chain, { scope: 'catalog:read' }), (ctx) => {
    ctx.body = { seller_id: ctx.state.partner.sellerId };
  });
  for (const route of ['bulk-a', 'bulk-b']) {
    router.post(
      `/${route}`,
      ...partnerChain(chain, { scope: 'catalog:write', idempotent: route, rateLimited: route }),
      async (ctx) => {
        const body = ctx.request.body as { items?: unknown[]; tag?: string; delay_ms?: number; crash?: boolean };
        if (!Array.isArray(body?.items))
          throw ApiError.validation('items is required.', [{ field: 'items', issue: 'missing' }]);
        const tag = body.tag ?? 'untagged';
        executions.set(tag, (executions.get(tag) ?? 0) + 1);
        if (body.delay_ms) await new Promise((r) => setTimeout(r, body.delay_ms));
        if (body.crash) throw new Error('boom: secret stack detail');
        ctx.body = { results: body.items.map(() => ({ status: 'accepted' })), execution: executions.get(tag) };
      },
    );
  }
  return router;
}

function probeApp(deps: Stack['deps']): Koa {
  const app = new Koa();
  app.silent = true;
  app.use(partnerStack(deps, probeRouter(deps)));
  return app;
}

beforeAll(async () => {
  stack = await startStack();
  probe = await listen(probeApp(stack.deps));
  const liveSettings = loadSettings({
    ...process.env,
    DATABASE_URL: stack.settings.DATABASE_URL,
    PARTNER_ENVIRONMENT: 'live',
  });
  liveProbe = await listen(probeApp({ ...stack.deps, settings: liveSettings }));
});
afterAll(async () => {
  await probe.close();
  await liveProbe.close();
  await stack.stop();
});

const get = (key?: string, headers: Record<string, string> = {}) =>
  call(probe.baseUrl, 'GET', '/partner/v1/probe', { key, headers });
const post = (
  route: string,
  key: string,
  idempotencyKey: string | undefined,
  body: unknown,
  headers: Record<string, string> = {},
) => call(probe.baseUrl, 'POST', `/partner/v1/${route}`, { key, idempotencyKey, body, headers });
const tag = () => `t${Math.random().toString(36).slice(2)}`;

describe('Partner keys', () => {
  it('accepts a key whose id and secret both contain _ and -', async () => {
    const seller = await buildSeller(stack.db, { keyId: 'a_b-c_d-e_f-', secret: '_-secret_with-dashes_and_under-s' });
    expect(seller.key).toBe('svc_sk_test_a_b-c_d-e_f-__-secret_with-dashes_and_under-s');
    const res = await get(seller.key);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ seller_id: seller.seller_id });
  });

  it('stores only a hash of the secret', async () => {
    const seller = await buildSeller(stack.db);
    const row = await stack.db('partner_keys').where({ id: seller.keyId }).first();
    const secret = seller.key.slice(-32);
    expect(JSON.stringify(row)).not.toContain(secret);
    expect(row.secret_hash).toMatch(/^[0-9a-f]{64}$/);
  });

  it.each([
    ['no Authorization header', undefined],
    ['a malformed key', 'Bearer svc_sk_test_short'],
    ['a lower-case scheme', 'bearer KEY'],
    ['two spaces after Bearer', 'Bearer  KEY'],
    ['another scheme', 'Token KEY'],
    ['a dashboard login token', 'Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig'],
  ])('refuses %s with 401 invalid_api_key', async (_label, authorization) => {
    const seller = await buildSeller(stack.db);
    const headers: Record<string, string> = authorization
      ? { authorization: authorization.replace('KEY', seller.key) }
      : {};
    const res = await get(undefined, headers);
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('invalid_api_key');
  });

  it('refuses a shopper customer token, as a bearer or in its own header', async () => {
    const token = `ctok_${'a'.repeat(16)}_${'b'.repeat(32)}`;
    const sent: Array<Record<string, string>> = [
      { authorization: `Bearer ${token}` },
      { 'x-svc-customer-token': token },
    ];
    for (const headers of sent) {
      const res = await get(undefined, headers);
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('invalid_api_key');
    }
  });

  it('reads no header but Authorization: a valid key elsewhere is no key', async () => {
    const seller = await buildSeller(stack.db);
    for (const name of ['x-api-key', 'api-key', 'x-authorization']) {
      const res = await get(undefined, { [name]: seller.key });
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('invalid_api_key');
    }
  });

  it('refuses an unknown key id and a wrong secret alike', async () => {
    const seller = await buildSeller(stack.db);
    const unknown = `svc_sk_test_${'Z'.repeat(12)}_${seller.key.slice(-32)}`;
    const wrongSecret = `${seller.key.slice(0, -32)}${'x'.repeat(32)}`;
    for (const key of [unknown, wrongSecret]) {
      const res = await get(key);
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('invalid_api_key');
    }
  });

  it('refuses a Checkout key on the Partner API', async () => {
    const res = await get(`svc_ck_test_${'a'.repeat(12)}_${'b'.repeat(32)}`);
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('invalid_api_key');
  });

  it('makes revocation effective on the next request', async () => {
    const seller = await buildSeller(stack.db);
    expect((await get(seller.key)).status).toBe(200);
    await revokePartnerKey(stack.db, seller.keyId);
    const res = await get(seller.key);
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('invalid_api_key');
  });

  it('answers 403 insufficient_scope naming the scope, and honours re-scoping at once', async () => {
    const seller = await buildSeller(stack.db, { scopes: ['orders:read'] });
    const res = await get(seller.key);
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('insufficient_scope');
    expect(res.body.error.message).toContain('catalog:read');
    await setPartnerKeyScopes(stack.db, seller.keyId, ['catalog:read']);
    expect((await get(seller.key)).status).toBe(200);
  });

  it('claims no Idempotency-Key and counts nothing for a wrong secret, a revoked key or a missing scope (the key is read and the key claimed in one statement)', async () => {
    const seller = await buildSeller(stack.db, { scopes: ['orders:read'] });
    const idem = `claim-${Date.now()}`;
    const wrongSecret = `${seller.key.slice(0, -32)}${'x'.repeat(32)}`;
    expect((await post('bulk-a', wrongSecret, idem, { items: [] })).status).toBe(401);
    expect((await post('bulk-a', seller.key, idem, { items: [] })).status).toBe(403);
    const scope = `partner:${seller.keyId}`;
    expect(await stack.db('idempotency_records').where({ scope })).toEqual([]);
    expect(await stack.db('rate_limit_windows').where('bucket', 'like', `${scope}:%`)).toEqual([]);
    // Once the key holds the scope, the same Idempotency-Key is fresh: it runs, and counts once.
    await setPartnerKeyScopes(stack.db, seller.keyId, ['catalog:write']);
    const res = await post('bulk-a', seller.key, idem, { items: [], tag: idem });
    expect(res.status).toBe(200);
    expect(res.headers.get('idempotent-replayed')).toBeNull();
    expect(res.headers.get('ratelimit')).toMatch(/^"bulk-a";r=59;/);
    await revokePartnerKey(stack.db, seller.keyId);
    expect((await post('bulk-a', seller.key, `${idem}-2`, { items: [] })).status).toBe(401);
    expect(await stack.db('idempotency_records').where({ scope }).pluck('key')).toEqual([idem]);
  });

  it('refuses a live key in the sandbox with api_key_wrong_environment before any lookup', async () => {
    const neverIssued = `svc_sk_live_${'q'.repeat(12)}_${'w'.repeat(32)}`;
    const res = await get(neverIssued);
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('api_key_wrong_environment');
    expect(res.body.error.message).toContain('live');
  });

  it('refuses a test key in live with api_key_wrong_environment, and accepts a live key there', async () => {
    const testSeller = await buildSeller(stack.db, { env: 'test' });
    const liveSeller = await buildSeller(stack.db, { env: 'live' });
    const refused = await call(liveProbe.baseUrl, 'GET', '/partner/v1/probe', { key: testSeller.key });
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe('api_key_wrong_environment');
    expect(refused.body.error.message).toContain('test');
    const accepted = await call(liveProbe.baseUrl, 'GET', '/partner/v1/probe', { key: liveSeller.key });
    expect(accepted.status).toBe(200);
  });
});

describe('Partner error envelope and request ids', () => {
  it('echoes X-Request-Id as error.request_id', async () => {
    const res = await get(undefined, { 'x-request-id': 'erp-sync-42' });
    expect(res.body).toEqual({
      error: { code: 'invalid_api_key', message: expect.any(String), request_id: 'erp-sync-42' },
    });
  });

  it('generates a req_ id when none is sent, and omits details when there are none', async () => {
    const res = await get();
    expect(res.body.error.request_id).toMatch(/^req_[A-Za-z0-9]+$/);
    expect(res.body.error).not.toHaveProperty('details');
    expect(res.headers.get('x-request-id')).toBe(res.body.error.request_id);
  });

  it('carries details with field and issue on validation errors', async () => {
    const seller = await buildSeller(stack.db);
    const res = await post('bulk-a', seller.key, tag(), { not_items: true });
    expect(res.status).toBe(400);
    expect(res.body.error).toEqual({
      code: 'validation_error',
      message: expect.any(String),
      details: [{ field: 'items', issue: 'missing' }],
      request_id: expect.stringMatching(/^req_/),
    });
  });

  it('refuses malformed JSON in the framework shape, before the handlers', async () => {
    const seller = await buildSeller(stack.db);
    const res = await call(probe.baseUrl, 'POST', '/partner/v1/bulk-a', {
      key: seller.key,
      idempotencyKey: tag(),
      rawBody: '{"items": [1, 2',
    });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ message: expect.any(String), type: 'entity.parse.failed' });
  });

  it('refuses a body over 100 KB with 413 in the framework shape', async () => {
    const seller = await buildSeller(stack.db);
    const big = JSON.stringify({ items: ['x'.repeat(100 * 1024)] });
    const res = await call(probe.baseUrl, 'POST', '/partner/v1/bulk-a', {
      key: seller.key,
      idempotencyKey: tag(),
      rawBody: big,
    });
    expect(res.status).toBe(413);
    expect(res.body).toEqual({ message: expect.any(String), type: 'entity.too.large' });
  });

  it('refuses a body nested deeper than 32 levels with 400 validation_error', async () => {
    const seller = await buildSeller(stack.db);
    const rawBody = `{"items":${'['.repeat(40_000)}${']'.repeat(40_000)}}`;
    const res = await call(probe.baseUrl, 'POST', '/partner/v1/bulk-a', {
      key: seller.key,
      idempotencyKey: tag(),
      rawBody,
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'validation_error', details: [{ issue: 'too_deep' }] });
  });

  it('accepts a body just under 100 KB', async () => {
    const seller = await buildSeller(stack.db);
    const filler = 'x'.repeat(100 * 1024 - 100);
    const res = await post('bulk-a', seller.key, tag(), { items: [], filler });
    expect(res.status).toBe(200);
  });

  it('answers an unexpected failure with a bare 500 internal_error and no stack trace', async () => {
    const seller = await buildSeller(stack.db);
    const res = await post('bulk-a', seller.key, tag(), { items: [], tag: tag(), crash: true });
    expect(res.status).toBe(500);
    expect(res.body.error.code).toBe('internal_error');
    expect(res.text).not.toContain('boom');
    expect(res.text).not.toMatch(/at .*\.ts:\d+/);
  });
});

describe('Partner idempotency', () => {
  it('requires an Idempotency-Key on write routes', async () => {
    const seller = await buildSeller(stack.db);
    const res = await post('bulk-a', seller.key, undefined, { items: [] });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('idempotency_key_required');
  });

  it('refuses an Idempotency-Key over 255 characters with validation_error, and takes 255', async () => {
    const seller = await buildSeller(stack.db);
    const tooLong = await post('bulk-a', seller.key, 'k'.repeat(256), { items: [] });
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.error.code).toBe('validation_error');
    expect(tooLong.body.error.details).toEqual([{ field: 'Idempotency-Key', issue: 'invalid' }]);
    expect((await post('bulk-a', seller.key, 'k'.repeat(255), { items: [] })).status).toBe(200);
  });

  it('replays the stored status and body with Idempotent-Replayed: true, running nothing again', async () => {
    const seller = await buildSeller(stack.db);
    const t = tag();
    const first = await post('bulk-a', seller.key, t, { items: [1], tag: t });
    const second = await post('bulk-a', seller.key, t, { items: [1], tag: t });
    expect(first.status).toBe(200);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(second.status).toBe(200);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.body).toEqual(first.body);
    expect(executions.get(t)).toBe(1);
  });

  it('treats JSON-equal bodies as the same (member order and whitespace do not matter)', async () => {
    const seller = await buildSeller(stack.db);
    const t = tag();
    await post('bulk-a', seller.key, t, { items: [{ a: 1, b: 2 }], tag: t });
    const reordered = `{ "tag" : "${t}",\n  "items": [ { "b": 2, "a": 1 } ] }`;
    const res = await call(probe.baseUrl, 'POST', '/partner/v1/bulk-a', {
      key: seller.key,
      idempotencyKey: t,
      rawBody: reordered,
    });
    expect(res.headers.get('idempotent-replayed')).toBe('true');
    expect(executions.get(t)).toBe(1);
  });

  it('answers 409 idempotency_key_conflict for another body', async () => {
    const seller = await buildSeller(stack.db);
    const t = tag();
    await post('bulk-a', seller.key, t, { items: [1], tag: t });
    const res = await post('bulk-a', seller.key, t, { items: [2], tag: t });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('idempotency_key_conflict');
  });

  it('answers 409 idempotency_key_conflict for another route', async () => {
    const seller = await buildSeller(stack.db);
    const t = tag();
    await post('bulk-a', seller.key, t, { items: [1], tag: t });
    const res = await post('bulk-b', seller.key, t, { items: [1], tag: t });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('idempotency_key_conflict');
  });

  it('answers 409 idempotency_key_in_progress while the first request runs', async () => {
    const seller = await buildSeller(stack.db);
    const t = tag();
    const slow = post('bulk-a', seller.key, t, { items: [1], tag: t, delay_ms: 800 });
    await new Promise((r) => setTimeout(r, 200));
    const res = await post('bulk-a', seller.key, t, { items: [1], tag: t, delay_ms: 800 });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('idempotency_key_in_progress');
    expect((await slow).status).toBe(200);
  });

  it('runs exactly once for 50 concurrent requests with one key', async () => {
    const seller = await buildSeller(stack.db);
    const t = tag();
    const responses = await Promise.all(
      Array.from({ length: 50 }, () => post('bulk-a', seller.key, t, { items: [1], tag: t, delay_ms: 300 })),
    );
    expect(executions.get(t)).toBe(1);
    const statuses = responses.map((r) => r.status);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(1);
    for (const r of responses) {
      if (r.status === 409) expect(r.body.error.code).toBe('idempotency_key_in_progress');
      else
        expect(r.body).toEqual(
          responses.find((x) => x.status === 200 && x.headers.get('idempotent-replayed') === null)!.body,
        );
    }
    expect(responses.filter((r) => r.status === 200 && r.headers.get('idempotent-replayed') === null)).toHaveLength(1);
  });

  it('stores nothing for a refused request, so it can be fixed and resent with the same key', async () => {
    const seller = await buildSeller(stack.db);
    const t = tag();
    expect((await post('bulk-a', seller.key, t, { tag: t })).status).toBe(400);
    const fixed = await post('bulk-a', seller.key, t, { items: [1], tag: t });
    expect(fixed.status).toBe(200);
    expect(fixed.headers.get('idempotent-replayed')).toBeNull();
  });

  it('settles a request that died while in progress as a stored 500 after 2 minutes, never running it again', async () => {
    const seller = await buildSeller(stack.db);
    const t = tag();
    const body = { items: [1], tag: t };
    const claim = (ageMs: number) =>
      stack.db('idempotency_records').insert({
        scope: `partner:${seller.keyId}`,
        key: t,
        route: 'bulk-a',
        body_hash: sha256Hex(canonicalJson(body)),
        state: 'in_progress',
        created_at: new Date(Date.now() - ageMs),
      });
    await claim(60_000);
    const young = await post('bulk-a', seller.key, t, body);
    expect(young.status).toBe(409);
    expect(young.body.error.code).toBe('idempotency_key_in_progress');

    await stack.db('idempotency_records').where({ key: t }).delete();
    await claim(2 * 60_000 + 1000);
    const settled = await post('bulk-a', seller.key, t, body);
    expect(settled.status).toBe(500);
    expect(settled.body.error.code).toBe('internal_error');
    expect(settled.headers.get('idempotent-replayed')).toBe('true');
    const again = await post('bulk-a', seller.key, t, body);
    expect(again.status).toBe(500);
    expect(again.body).toEqual(settled.body);
    expect(executions.get(t)).toBeUndefined();
  });

  it('stores a 500 and replays it', async () => {
    const seller = await buildSeller(stack.db);
    const t = tag();
    const first = await post('bulk-a', seller.key, t, { items: [1], tag: t, crash: true });
    const second = await post('bulk-a', seller.key, t, { items: [1], tag: t, crash: true });
    expect(first.status).toBe(500);
    expect(second.status).toBe(500);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.body).toEqual(first.body);
    expect(executions.get(t)).toBe(1);
  });

  it('scopes keys to the API key that sends them', async () => {
    const a = await buildSeller(stack.db);
    const b = await buildSeller(stack.db);
    const t = tag();
    await post('bulk-a', a.key, t, { items: [1], tag: t });
    const other = await post('bulk-a', b.key, t, { items: [1], tag: t });
    expect(other.headers.get('idempotent-replayed')).toBeNull();
    expect(executions.get(t)).toBe(2);
  });

  it('forgets a stored outcome after 24 hours', async () => {
    const seller = await buildSeller(stack.db);
    const t = tag();
    await post('bulk-a', seller.key, t, { items: [1], tag: t });
    stack.clock.advance(24 * 60 * 60 * 1000 + 1000);
    try {
      const res = await post('bulk-a', seller.key, t, { items: [2], tag: t });
      expect(res.status).toBe(200);
      expect(res.headers.get('idempotent-replayed')).toBeNull();
      expect(executions.get(t)).toBe(2);
    } finally {
      stack.clock.advance(-(24 * 60 * 60 * 1000 + 1000));
    }
  });
});

describe('Partner bulk rate limit (60 per 600 s per key, per route)', () => {
  beforeEach(() => stack.clock.freeze(new Date(Math.ceil(Date.now() / 600_000) * 600_000 + 5_000)));
  afterEach(() => stack.clock.unfreeze());

  it('answers the 61st request in a window with 429 rate_limited and Retry-After until the window resets', async () => {
    const seller = await buildSeller(stack.db);
    for (let i = 0; i < 60; i++) expect((await post('bulk-a', seller.key, tag(), { items: [] })).status).toBe(200);
    const res = await post('bulk-a', seller.key, tag(), { items: [] });
    expect(res.status).toBe(429);
    expect(res.body.error.code).toBe('rate_limited');
    expect(res.headers.get('retry-after')).toBe('595');
  });

  it('opens again in the next window', async () => {
    const seller = await buildSeller(stack.db);
    for (let i = 0; i < 61; i++) await post('bulk-a', seller.key, tag(), { items: [] });
    stack.clock.advance(595_000);
    expect((await post('bulk-a', seller.key, tag(), { items: [] })).status).toBe(200);
  });

  it('does not count replays, which are answered before the limit', async () => {
    const seller = await buildSeller(stack.db);
    const replayed = tag();
    await post('bulk-a', seller.key, replayed, { items: [] });
    for (let i = 0; i < 59; i++) await post('bulk-a', seller.key, tag(), { items: [] });
    for (let i = 0; i < 5; i++) {
      const res = await post('bulk-a', seller.key, replayed, { items: [] });
      expect(res.status).toBe(200);
      expect(res.headers.get('idempotent-replayed')).toBe('true');
    }
    expect((await post('bulk-a', seller.key, tag(), { items: [] })).status).toBe(429);
  });

  it('counts requests refused for a bad body', async () => {
    const seller = await buildSeller(stack.db);
    for (let i = 0; i < 60; i++) expect((await post('bulk-a', seller.key, tag(), { bad: true })).status).toBe(400);
    expect((await post('bulk-a', seller.key, tag(), { items: [] })).status).toBe(429);
  });

  it('keeps separate windows per route and per key', async () => {
    const seller = await buildSeller(stack.db);
    const other = await buildSeller(stack.db);
    for (let i = 0; i < 60; i++) await post('bulk-a', seller.key, tag(), { items: [] });
    expect((await post('bulk-a', seller.key, tag(), { items: [] })).status).toBe(429);
    expect((await post('bulk-b', seller.key, tag(), { items: [] })).status).toBe(200);
    expect((await post('bulk-a', other.key, tag(), { items: [] })).status).toBe(200);
  });

  it('does not rate-limit reads', async () => {
    const seller = await buildSeller(stack.db);
    for (let i = 0; i < 70; i++) expect((await get(seller.key)).status).toBe(200);
  });
});
