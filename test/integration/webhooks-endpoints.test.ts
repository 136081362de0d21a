import { randomString } from '../../src/lib/ids';
import { createCheckoutKey } from '../../src/ops/checkout-keys';
import { buildMerchant } from '../helpers/factories';
import { call, TestResponse } from '../helpers/http';
import { startStack, Stack } from '../helpers/stack';

/**
 * Webhook endpoint management over HTTP: create, list, read, PATCH, DELETE and rotate_secret, mode
 * isolation, scopes, and every URL-safety refusal at registration. Names under `.webhooks.test`
 * resolve through the stack's table resolver (test/helpers/https-receiver.ts); none is allow-listed.
 */
let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack.stop());

const URL_OK = 'https://shop.webhooks.test/hooks/payments';
const idem = () => `idem_${randomString(16)}`;
const api = (method: string, path: string, key: string, body?: unknown, idempotencyKey?: string) =>
  call(stack.baseUrl, method, `/v1${path}`, { key, body, idempotencyKey });
const create = (key: string, body: Record<string, unknown>, idempotencyKey = idem()) =>
  api('POST', '/webhook_endpoints', key, { mode: 'test', events: ['*'], ...body }, idempotencyKey);

function expectError(res: TestResponse, status: number, code: string, details: unknown[] = []) {
  expect({ status: res.status, code: res.body?.error?.code, details: res.body?.error?.details }).toEqual({
    status,
    code,
    details,
  });
}

const expectRefusedUrl = async (key: string, url: string, issue: string) =>
  expectError(await create(key, { url }), 400, 'validation_error', [{ field: 'url', issue }]);

describe('create and read', () => {
  it('creates an enabled endpoint (201) whose whsec_ secret appears in that response only', async () => {
    const m = await buildMerchant(stack.db);
    const res = await create(m.secretKey, {
      url: URL_OK,
      events: ['checkout.session.completed', 'refund.succeeded'],
      description: 'Orders service',
    });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^we_[0-9a-z]{28}$/),
      object: 'webhook_endpoint',
      url: URL_OK,
      events: ['checkout.session.completed', 'refund.succeeded'],
      mode: 'test',
      status: 'enabled',
      disabled_reason: null,
      description: 'Orders service',
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      secret: expect.stringMatching(/^whsec_[0-9A-Za-z]{32}$/),
    });
    const { secret, ...endpoint } = res.body;
    const read = await api('GET', `/webhook_endpoints/${endpoint.id}`, m.secretKey);
    expect(read.status).toBe(200);
    expect(read.body).toEqual(endpoint);
    const list = await api('GET', '/webhook_endpoints', m.secretKey);
    expect(list.body).toEqual({ data: [endpoint] });
    expect(read.text + list.text).not.toContain(secret);
  });

  it('stores signing secrets encrypted, nowhere in the clear, not even for an idempotent replay', async () => {
    const m = await buildMerchant(stack.db);
    const key = idem();
    const first = await create(m.secretKey, { url: URL_OK }, key);
    const replay = await create(m.secretKey, { url: URL_OK }, key);
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body).toEqual(first.body);
    const secretBody = first.body.secret.slice('whsec_'.length);
    const row = await stack.db('webhook_endpoints').where({ id: first.body.id }).first();
    expect(row.secret_ciphertext).toMatch(/^v1\./);
    const stored = await stack.db('idempotency_records').where({ key }).first();
    expect(JSON.stringify(row) + JSON.stringify(stored)).not.toContain(secretBody);
  });

  it('converges concurrent creates with one Idempotency-Key on one endpoint: every answer names it and its secret', async () => {
    const m = await buildMerchant(stack.db);
    const key = idem();
    const answers = await Promise.all(Array.from({ length: 5 }, () => create(m.secretKey, { url: URL_OK }, key)));
    expect(answers.map((r) => r.status)).toEqual([201, 201, 201, 201, 201]);
    const rows = await stack.db('webhook_endpoints').where({ merchant_id: m.merchantId });
    expect(rows).toHaveLength(1);
    expect(new Set(answers.map((r) => r.body.id))).toEqual(new Set([rows[0].id]));
    expect(new Set(answers.map((r) => r.body.secret)).size).toBe(1);
  });

  it('lets only one of concurrent creates with one key and different bodies through; the others are 409 idempotency_key_conflict', async () => {
    const m = await buildMerchant(stack.db);
    const key = idem();
    const answers = await Promise.all(
      Array.from({ length: 5 }, (_, i) => create(m.secretKey, { url: URL_OK, description: `endpoint ${i}` }, key)),
    );
    expect(answers.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409]);
    expect(answers.filter((r) => r.status === 409).every((r) => r.body.error.code === 'idempotency_key_conflict')).toBe(
      true,
    );
    expect(await stack.db('webhook_endpoints').where({ merchant_id: m.merchantId })).toHaveLength(1);
  });

  it('treats a key as fresh after 24 hours: another body makes a new endpoint, the same body finds the old one', async () => {
    const m = await buildMerchant(stack.db);
    const key = idem();
    const first = await create(m.secretKey, { url: URL_OK }, key);
    const offset = stack.clock().getTime() - Date.now();
    stack.clock.advance(24 * 60 * 60 * 1000 + 60_000);
    try {
      const other = await create(m.secretKey, { url: URL_OK, description: 'second' }, key);
      expect(other.status).toBe(201);
      expect(other.body.id).not.toBe(first.body.id);
      stack.clock.advance(24 * 60 * 60 * 1000 + 60_000);
      const same = await create(m.secretKey, { url: URL_OK }, key);
      expect(same.status).toBe(201);
      expect(same.body).toMatchObject({ id: first.body.id, secret: first.body.secret });
      expect(await stack.db('webhook_endpoints').where({ merchant_id: m.merchantId })).toHaveLength(2);
    } finally {
      stack.clock.advance(offset - (stack.clock().getTime() - Date.now()));
    }
  });

  it('requires an Idempotency-Key to create', async () => {
    const m = await buildMerchant(stack.db);
    const res = await api('POST', '/webhook_endpoints', m.secretKey, { url: URL_OK, events: ['*'], mode: 'test' });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('idempotency_key_required');
  });

  it('validates the body: event types or *, mode, description up to 200 characters, no unknown fields', async () => {
    const m = await buildMerchant(stack.db);
    const fields = async (body: Record<string, unknown>) =>
      ((await create(m.secretKey, { url: URL_OK, ...body })).body.error?.details ?? []).map(
        (d: { field: string }) => d.field,
      );
    expect(await fields({ events: ['checkout.session.exploded'] })).toEqual(['events.0']);
    expect(await fields({ events: [] })).toEqual(['events']);
    expect(await fields({ mode: 'staging' })).toEqual(['mode']);
    expect(await fields({ description: 'x'.repeat(201) })).toEqual(['description']);
    expect(await fields({ secret: 'whsec_mine' })).toEqual(['secret']);
    expect((await create(m.secretKey, { url: URL_OK, description: 'x'.repeat(200) })).status).toBe(201);
  });

  it('answers 404 endpoint_not_found for an unknown id', async () => {
    const m = await buildMerchant(stack.db);
    expectError(await api('GET', '/webhook_endpoints/we_nothing', m.secretKey), 404, 'endpoint_not_found');
  });

  it('requires the webhooks:manage scope on every endpoint route and on redeliver', async () => {
    const m = await buildMerchant(stack.db, { scopes: ['events:read', 'sessions:write'] });
    for (const [method, path] of [
      ['GET', '/webhook_endpoints'],
      ['POST', '/webhook_endpoints'],
      ['GET', '/webhook_endpoints/we_x'],
      ['PATCH', '/webhook_endpoints/we_x'],
      ['DELETE', '/webhook_endpoints/we_x'],
      ['POST', '/webhook_endpoints/we_x/rotate_secret'],
      ['POST', '/webhook_endpoints/we_x/test'],
      ['POST', '/events/evt_x/redeliver'],
    ]) {
      const res = await api(method, path, m.secretKey, method === 'GET' ? undefined : {}, idem());
      expect([method, path, res.status, res.body.error.code]).toEqual([method, path, 403, 'insufficient_scope']);
      expect(res.body.error.message).toContain('webhooks:manage');
    }
  });
});

describe('NUL bytes', () => {
  it('answers 404 endpoint_not_found for an id with U+0000 on GET, PATCH, DELETE, rotate_secret and test', async () => {
    const m = await buildMerchant(stack.db);
    for (const [method, suffix, body] of [
      ['GET', '', undefined],
      ['PATCH', '', { description: 'x' }],
      ['DELETE', '', undefined],
      ['POST', '/rotate_secret', undefined],
      ['POST', '/test', { type: 'checkout.session.completed' }],
    ] as const) {
      const res = await api(method, `/webhook_endpoints/%00${suffix}`, m.secretKey, body);
      expectError(res, 404, 'endpoint_not_found');
      const mixed = await api(method, `/webhook_endpoints/we_%00x${suffix}`, m.secretKey, body);
      expectError(mixed, 404, 'endpoint_not_found');
    }
  });

  it('refuses a url or description with U+0000 with 400 validation_error, on create and PATCH', async () => {
    const m = await buildMerchant(stack.db);
    const issue = 'Must be valid Unicode text without U+0000';
    expectError(await create(m.secretKey, { url: `${URL_OK}\u0000` }), 400, 'validation_error', [
      { field: 'url', issue },
    ]);
    expectError(await create(m.secretKey, { url: URL_OK, description: 'a\u0000b' }), 400, 'validation_error', [
      { field: 'description', issue },
    ]);
    const made = await create(m.secretKey, { url: URL_OK });
    expect(made.status).toBe(201);
    const patch = (body: unknown) => api('PATCH', `/webhook_endpoints/${made.body.id}`, m.secretKey, body);
    expectError(await patch({ url: `${URL_OK}\u0000` }), 400, 'validation_error', [{ field: 'url', issue }]);
    expectError(await patch({ description: '\u0000' }), 400, 'validation_error', [{ field: 'description', issue }]);
  });
});

describe('modes', () => {
  it('refuses a test key registering a live endpoint, and a live key a test one, with 403 mode_mismatch', async () => {
    const m = await buildMerchant(stack.db);
    const live = await createCheckoutKey(stack.db, { merchantId: m.merchantId, mode: 'live', type: 'secret' });
    expectError(await create(m.secretKey, { url: URL_OK, mode: 'live' }), 403, 'mode_mismatch');
    expectError(await create(live.key, { url: URL_OK, mode: 'test' }), 403, 'mode_mismatch');
    expect((await create(live.key, { url: URL_OK, mode: 'live' })).body.mode).toBe('live');
  });

  it("lists only the key's mode and answers 404 for the other mode's or another merchant's endpoint", async () => {
    const m = await buildMerchant(stack.db);
    const other = await buildMerchant(stack.db);
    const live = await createCheckoutKey(stack.db, { merchantId: m.merchantId, mode: 'live', type: 'secret' });
    const testEndpoint = (await create(m.secretKey, { url: URL_OK })).body;
    const liveEndpoint = (await create(live.key, { url: URL_OK, mode: 'live' })).body;
    expect((await api('GET', '/webhook_endpoints', m.secretKey)).body.data.map((e: any) => e.id)).toEqual([
      testEndpoint.id,
    ]);
    expect((await api('GET', '/webhook_endpoints', live.key)).body.data.map((e: any) => e.id)).toEqual([
      liveEndpoint.id,
    ]);
    for (const [key, id] of [
      [live.key, testEndpoint.id],
      [m.secretKey, liveEndpoint.id],
      [other.secretKey, testEndpoint.id],
    ]) {
      for (const [method, path, body] of [
        ['GET', `/webhook_endpoints/${id}`],
        ['PATCH', `/webhook_endpoints/${id}`, { description: 'mine now' }],
        ['POST', `/webhook_endpoints/${id}/rotate_secret`],
        ['POST', `/webhook_endpoints/${id}/test`, { type: 'checkout.session.completed' }],
        ['DELETE', `/webhook_endpoints/${id}`],
      ] as const) {
        expectError(await api(method, path, key, body), 404, 'endpoint_not_found');
      }
    }
    expect((await api('GET', `/webhook_endpoints/${testEndpoint.id}`, m.secretKey)).body.description).toBeNull();
  });
});

describe('PATCH', () => {
  it('changes url, events, status and description, and only what it is given', async () => {
    const m = await buildMerchant(stack.db);
    const { id } = (await create(m.secretKey, { url: URL_OK, description: 'first' })).body;
    const url = 'https://public.webhooks.test/v2/hooks';
    const res = await api('PATCH', `/webhook_endpoints/${id}`, m.secretKey, {
      url,
      events: ['refund.failed'],
      status: 'disabled',
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id, url, events: ['refund.failed'], status: 'disabled', description: 'first' });
    expect(res.body).not.toHaveProperty('secret');
    const cleared = await api('PATCH', `/webhook_endpoints/${id}`, m.secretKey, {
      description: null,
      status: 'enabled',
    });
    expect(cleared.body).toMatchObject({ url, status: 'enabled', disabled_reason: null, description: null });
  });

  it('refuses a description over 200 characters and an unknown status', async () => {
    const m = await buildMerchant(stack.db);
    const { id } = (await create(m.secretKey, { url: URL_OK })).body;
    const res = await api('PATCH', `/webhook_endpoints/${id}`, m.secretKey, {
      description: 'x'.repeat(201),
      status: 'paused',
    });
    expect(res.status).toBe(400);
    expect(res.body.error.details.map((d: { field: string }) => d.field)).toEqual(['status', 'description']);
  });

  it('checks a new url like a registration', async () => {
    const m = await buildMerchant(stack.db);
    const { id } = (await create(m.secretKey, { url: URL_OK })).body;
    const res = await api('PATCH', `/webhook_endpoints/${id}`, m.secretKey, { url: 'https://10.0.0.8/hooks' });
    expectError(res, 400, 'validation_error', [{ field: 'url', issue: 'private_target' }]);
    expect((await api('GET', `/webhook_endpoints/${id}`, m.secretKey)).body.url).toBe(URL_OK);
  });

  it('re-enabling an endpoint disabled for delivery failures clears disabled_reason and the failure clock', async () => {
    const m = await buildMerchant(stack.db);
    const { id } = (await create(m.secretKey, { url: URL_OK })).body;
    await stack
      .db('webhook_endpoints')
      .where({ id })
      .update({ status: 'disabled', disabled_reason: 'delivery_failures', failing_since: new Date(0) });
    const read = await api('GET', `/webhook_endpoints/${id}`, m.secretKey);
    expect(read.body).toMatchObject({ status: 'disabled', disabled_reason: 'delivery_failures' });
    const res = await api('PATCH', `/webhook_endpoints/${id}`, m.secretKey, { status: 'enabled' });
    expect(res.body).toMatchObject({ status: 'enabled', disabled_reason: null });
    expect((await stack.db('webhook_endpoints').where({ id }).first()).failing_since).toBeNull();
  });
});

describe('DELETE', () => {
  it('answers 204, then 404 endpoint_not_found on read, PATCH and a second DELETE; the secrets go with the row', async () => {
    const m = await buildMerchant(stack.db);
    const { id } = (await create(m.secretKey, { url: URL_OK })).body;
    await api('POST', `/webhook_endpoints/${id}/rotate_secret`, m.secretKey);
    const res = await api('DELETE', `/webhook_endpoints/${id}`, m.secretKey);
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expectError(await api('GET', `/webhook_endpoints/${id}`, m.secretKey), 404, 'endpoint_not_found');
    expectError(
      await api('PATCH', `/webhook_endpoints/${id}`, m.secretKey, { status: 'enabled' }),
      404,
      'endpoint_not_found',
    );
    expectError(await api('DELETE', `/webhook_endpoints/${id}`, m.secretKey), 404, 'endpoint_not_found');
    expect(await stack.db('webhook_endpoints').where({ id }).first()).toBeUndefined();
    expect((await api('GET', '/webhook_endpoints', m.secretKey)).body.data).toEqual([]);
  });
});

describe('rotate_secret', () => {
  it('answers 200 with the endpoint and a new secret, keeping the old one for 24 hours beside it', async () => {
    const m = await buildMerchant(stack.db);
    const created = (await create(m.secretKey, { url: URL_OK })).body;
    stack.clock.freeze();
    try {
      const res = await api('POST', `/webhook_endpoints/${created.id}/rotate_secret`, m.secretKey);
      expect(res.status).toBe(200);
      const { secret, ...endpoint } = res.body;
      const { secret: oldSecret, ...before } = created;
      expect(endpoint).toEqual(before);
      expect(secret).toMatch(/^whsec_[0-9A-Za-z]{32}$/);
      expect(secret).not.toBe(oldSecret);
      const row = await stack.db('webhook_endpoints').where({ id: created.id }).first();
      expect(stack.deps.webhooks!.cipher.decrypt(row.secret_ciphertext, created.id)).toBe(secret);
      expect(stack.deps.webhooks!.cipher.decrypt(row.previous_secret_ciphertext, created.id)).toBe(oldSecret);
      expect(row.previous_secret_expires_at.getTime() - stack.clock().getTime()).toBe(24 * 60 * 60 * 1000);
    } finally {
      stack.clock.unfreeze();
    }
  });
});

describe('URL safety at registration', () => {
  let key: string;
  beforeAll(async () => {
    key = (await buildMerchant(stack.db)).secretKey;
  });

  it('requires https (https_required)', async () => {
    await expectRefusedUrl(key, 'http://shop.webhooks.test/hooks', 'https_required');
    await expectRefusedUrl(key, 'ftp://shop.webhooks.test/hooks', 'https_required');
    await expectRefusedUrl(key, 'shop.webhooks.test/hooks', 'https_required');
  });

  it('refuses credentials in the URL (credentials)', async () => {
    await expectRefusedUrl(key, 'https://user:secret@shop.webhooks.test/hooks', 'credentials');
  });

  it('refuses localhost (private_target)', async () => {
    await expectRefusedUrl(key, 'https://localhost/hooks', 'private_target');
    await expectRefusedUrl(key, 'https://localhost.:8443/hooks', 'private_target');
  });

  it('refuses .internal and .local hosts (private_target)', async () => {
    await expectRefusedUrl(key, 'https://billing.internal/hooks', 'private_target');
    await expectRefusedUrl(key, 'https://printer.local/hooks', 'private_target');
  });

  it('refuses a name that resolves to 127.0.0.1 (private_target)', async () => {
    await expectRefusedUrl(key, 'https://loopback.webhooks.test/hooks', 'private_target');
  });

  it('refuses the IPv6 loopback, literal or by name (private_target)', async () => {
    await expectRefusedUrl(key, 'https://[::1]/hooks', 'private_target');
    await expectRefusedUrl(key, 'https://v6-loopback.webhooks.test/hooks', 'private_target');
  });

  it('refuses private addresses, literal or by name (private_target)', async () => {
    await expectRefusedUrl(key, 'https://192.168.1.20/hooks', 'private_target');
    await expectRefusedUrl(key, 'https://private.webhooks.test/hooks', 'private_target');
  });

  it('refuses link-local addresses such as the cloud metadata service (private_target)', async () => {
    await expectRefusedUrl(key, 'https://169.254.169.254/latest/meta-data', 'private_target');
    await expectRefusedUrl(key, 'https://link-local.webhooks.test/hooks', 'private_target');
  });

  it('refuses a loopback address written another way (private_target)', async () => {
    await expectRefusedUrl(key, 'https://127.1/hooks', 'private_target');
    await expectRefusedUrl(key, 'https://[::ffff:7f00:1]/hooks', 'private_target');
  });

  it('refuses IPv4 inside IPv6: IPv4-compatible ::7f00:1 and IPv4-translated ::ffff:0:7f00:1 (private_target)', async () => {
    await expectRefusedUrl(key, 'https://[::7f00:1]/hooks', 'private_target');
    await expectRefusedUrl(key, 'https://[::ffff:0:7f00:1]/hooks', 'private_target');
  });

  it('refuses a host that does not resolve (unresolvable)', async () => {
    await expectRefusedUrl(key, 'https://nowhere.webhooks.test/hooks', 'unresolvable');
  });
});
