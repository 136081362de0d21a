import { hashSecret, parseKey } from '../../src/keys/keys';
import { randomString } from '../../src/lib/ids';
import { auditRows, ConsoleBrowser, consoleUser, TestConsoleUser } from '../helpers/console';
import { buildMerchant, buildSeller } from '../helpers/factories';
import { call } from '../helpers/http';
import { until, useWebhookStack, webhookSteps } from '../helpers/webhooks';

/**
 * The console's merchant pages (docs/console.md) over real HTTP on the real app, Postgres, Temporal
 * worker and an HTTPS receiver: the test/live switch, Developers › Webhooks (endpoints, deliveries,
 * resend, recover) and Developers › API keys, and every action against every role and tenant.
 */
const env = useWebhookStack();
const steps = webhookSteps(() => env.stack);
const WEBHOOKS = '/console/developers/webhooks';
const KEYS = '/console/developers/keys';
const EVENTS = '/console/developers/events';

const browser = () => new ConsoleBrowser(env.stack);
async function signedIn(user: TestConsoleUser) {
  const b = browser();
  await b.signIn(user);
  return b;
}
const requestKeyOf = (text: string) => /name="request_key" value="([^"]+)"/.exec(text)?.[1] ?? '';
const endpointsOf = (merchantId: string) =>
  env.stack.db('webhook_endpoints').where({ merchant_id: merchantId }).orderBy('id');

describe('test and live mode', () => {
  it('opens in test mode with a banner on every merchant page; the switch is a post that sets a __Host- cookie and scopes every list', async () => {
    const m = await buildMerchant(env.stack.db);
    const b = await signedIn(await consoleUser(env.stack, { merchantId: m.merchantId }, 'owner'));
    expect((await b.get('/console')).location).toBe(WEBHOOKS);
    for (const path of [WEBHOOKS, KEYS]) expect((await b.get(path)).text).toContain('id="test-mode-banner"');
    const testEndpoint = await steps.createEndpoint(m.secretKey, env.receiver.url('/mode-test'));

    // No state change on GET.
    expect((await b.get('/console/mode?mode=live')).status).toBe(405);
    const toLive = await b.post('/console/mode', { mode: 'live', next: WEBHOOKS });
    expect([toLive.status, toLive.location]).toEqual([303, WEBHOOKS]);
    const cookie = toLive.headers.getSetCookie().find((c) => c.startsWith('__Host-console_mode='))!;
    expect(cookie.split('; ').slice(1).sort()).toEqual([
      'HttpOnly',
      'Max-Age=31536000',
      'Path=/',
      'SameSite=Strict',
      'Secure',
    ]);
    const live = await b.get(WEBHOOKS);
    expect(live.text).not.toContain('id="test-mode-banner"');
    expect(live.text).not.toContain(testEndpoint.id);
    // The test endpoint does not exist in live mode.
    expect((await b.get(`${WEBHOOKS}/${testEndpoint.id}`)).status).toBe(404);
    expect((await b.get(KEYS)).text).not.toContain(m.secretKeyId);

    const created = await b.post(WEBHOOKS, {
      url: env.receiver.url('/mode-live'),
      events: ['*'],
      request_key: requestKeyOf(live.text),
    });
    expect(created.status).toBe(201);
    const liveRow = (await endpointsOf(m.merchantId)).find((e) => e.url.endsWith('/mode-live'))!;
    expect(liveRow.mode).toBe('live');

    // Another site cannot flip the mode; a redirect target off the console is not followed.
    expect((await b.post('/console/mode', { mode: 'test' }, { csrf: null })).status).toBe(403);
    const back = await b.post('/console/mode', { mode: 'test', next: 'https://evil.example/' });
    expect([back.status, back.location]).toEqual([303, '/console']);
    const test = await b.get(WEBHOOKS);
    expect(test.text).toContain('id="test-mode-banner"');
    expect(test.text).toContain(testEndpoint.id);
    expect(test.text).not.toContain(liveRow.id);
  });
});

describe('Developers › Webhooks', () => {
  it('creates an endpoint (secret shown once), shows a failed delivery with the receiver’s body escaped, resends it after the fix, and recovers every failed event since a time', async () => {
    const m = await steps.webhookMerchant();
    const user = await consoleUser(env.stack, { merchantId: m.merchantId }, 'developer');
    const b = await signedIn(user);
    const page = await b.get(WEBHOOKS);
    const path = `/console-flow-${randomString(6)}`;
    const created = await b.post(WEBHOOKS, {
      url: env.receiver.url(path),
      events: ['checkout.session.completed'],
      description: 'Orders <system>',
      request_key: requestKeyOf(page.text),
    });
    expect(created.status).toBe(201);
    const secret = /id="new-secret-value">([^<]+)</.exec(created.text)![1];
    const [endpoint] = await endpointsOf(m.merchantId);
    expect([endpoint.mode, endpoint.events, endpoint.status]).toEqual([
      'test',
      ['checkout.session.completed'],
      'enabled',
    ]);
    expect(endpoint.secret_ciphertext).not.toContain(secret);
    expect((await b.get(WEBHOOKS)).text).not.toContain(secret);

    env.receiver.respond = (r) =>
      r.path === path ? { status: 500, body: '<script>alert("x")</script> receiver down' } : { status: 200 };
    const base = `${WEBHOOKS}/${endpoint.id}`;
    await b.get(base);
    const sent = await b.post(`${base}/test`, { type: 'checkout.session.completed' });
    expect(sent.status).toBe(202);
    const first = /Test event (evt_[A-Za-z0-9_]+) sent/.exec(sent.text)![1];
    await until(
      () => env.stack.db('event_deliveries').where({ event_id: first, endpoint_id: endpoint.id }),
      (rows) => rows.some((r) => r.status_code === 500),
      'the failed attempt',
    );
    const failing = await b.get(base);
    expect(failing.text).toContain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; receiver down');
    expect(failing.text).not.toContain('<script>alert');
    expect(failing.text).toContain('Every delivery to this endpoint has failed since');
    expect(failing.text).toMatch(/class="delivery-(pending|failed)"/);

    // A second event fails too; then the receiver is fixed.
    const second = /Test event (evt_[A-Za-z0-9_]+) sent/.exec(
      (await b.post(`${base}/test`, { type: 'checkout.session.completed' })).text,
    )![1];
    await until(
      () => env.stack.db('webhook_undelivered').where({ endpoint_id: endpoint.id }).pluck('event_id'),
      (ids) => ids.includes(first) && ids.includes(second),
      'both events on the undelivered list',
    );
    env.receiver.respond = () => ({ status: 200 });

    const resent = await b.post(`${base}/deliveries/${first}/resend`);
    expect(resent.status).toBe(202);
    await until(
      () => env.stack.db('event_deliveries').where({ event_id: first, endpoint_id: endpoint.id, status_code: 200 }),
      (rows) => rows.some((r) => Number(r.generation) > 0),
      'the resent event delivered',
    );

    await b.get(base);
    const since = new Date(env.stack.clock().getTime() - 3_600_000).toISOString();
    const recovered = await b.post(`${base}/recover`, { since, request_key: requestKeyOf((await b.get(base)).text) });
    expect(recovered.status).toBe(202);
    // Only what is still undelivered: the second event (the first was delivered by the resend).
    expect(recovered.text).toContain('1 failed event(s) since');
    await until(
      () => env.stack.db('event_deliveries').where({ event_id: second, endpoint_id: endpoint.id, status_code: 200 }),
      (rows) => rows.length > 0,
      'the recovered event delivered',
    );
    // A window beyond the event log's 30 days is refused whole.
    const old = new Date(env.stack.clock().getTime() - 31 * 86_400_000).toISOString();
    expect((await b.post(`${base}/recover`, { since: old })).status).toBe(422);

    const actions = (await auditRows(env.stack.db, user.id)).map((r) => `${r.action}:${r.outcome}`);
    expect(actions).toEqual(
      expect.arrayContaining([
        'webhook_endpoint_create:success',
        'webhook_test_event:success',
        'webhook_resend:success',
        'webhook_recover:success',
      ]),
    );
    expect(JSON.stringify(await auditRows(env.stack.db, user.id))).not.toContain(secret);
  });

  it('edits event types, disables (explained) and enables an endpoint through the API’s service', async () => {
    const m = await buildMerchant(env.stack.db);
    const endpoint = await steps.createEndpoint(m.secretKey, env.receiver.url('/edit'));
    const b = await signedIn(await consoleUser(env.stack, { merchantId: m.merchantId }, 'owner'));
    const base = `${WEBHOOKS}/${endpoint.id}`;
    await b.get(base);
    expect((await b.post(`${base}/events`, { events: ['refund.succeeded', 'refund.failed'] })).status).toBe(200);
    expect((await b.post(`${base}/events`, {})).status).toBe(422);
    const disabled = await b.post(`${base}/disable`);
    expect(disabled.text).toContain('This endpoint is disabled');
    const api = await call(env.stack.baseUrl, 'GET', `/v1/webhook_endpoints/${endpoint.id}`, { key: m.secretKey });
    expect([api.body.events, api.body.status]).toEqual([['refund.succeeded', 'refund.failed'], 'disabled']);
    // Recover to a disabled endpoint: 409, enable it first.
    const since = new Date(env.stack.clock().getTime() - 60_000).toISOString();
    expect((await b.post(`${base}/recover`, { since })).status).toBe(409);
    await b.post(`${base}/enable`);
    expect((await endpointsOf(m.merchantId))[0].status).toBe('enabled');
    // Disabled by the service after days of failures: the page says so and what to do.
    await env.stack
      .db('webhook_endpoints')
      .where({ id: endpoint.id })
      .update({ status: 'disabled', disabled_reason: 'delivery_failures' });
    expect((await b.get(base)).text).toContain(
      'This endpoint was disabled after every delivery failed for days (delivery_failures). Fix the receiver, enable it',
    );
  });

  it('rotating the secret needs password and code again; the new secret is shown once with the old one’s overlap end', async () => {
    const m = await buildMerchant(env.stack.db);
    const endpoint = await steps.createEndpoint(m.secretKey, env.receiver.url('/rotate'));
    const user = await consoleUser(env.stack, { merchantId: m.merchantId }, 'owner');
    const b = await signedIn(user);
    env.stack.clock.advance(6 * 60_000);
    const base = `${WEBHOOKS}/${endpoint.id}`;
    await b.get(base);
    const stale = await b.post(`${base}/rotate`);
    expect([stale.status, stale.location]).toEqual([303, `/console/reauth?next=${encodeURIComponent(WEBHOOKS)}`]);
    expect((await endpointsOf(m.merchantId))[0].previous_secret_ciphertext).toBeNull();
    await b.get(stale.location!);
    await b.post(stale.location!, { password: user.password, code: b.nextCode(user) });
    await b.get(base);
    const rotated = await b.post(`${base}/rotate`);
    expect(rotated.status).toBe(200);
    const secret = /id="new-secret-value">([^<]+)</.exec(rotated.text)![1];
    expect(secret).not.toBe(endpoint.secret);
    const [row] = await endpointsOf(m.merchantId);
    expect(rotated.text).toContain(`until ${new Date(row.previous_secret_expires_at).toISOString()}`);
    expect(row.previous_secret_expires_at.getTime() - row.updated_at.getTime()).toBe(24 * 3_600_000);
  });
});

describe('Developers › API keys', () => {
  it('creates a secret key shown once (only its hash kept) that works on the Checkout API, rolls it with an expiry and revokes it', async () => {
    const m = await buildMerchant(env.stack.db);
    const user = await consoleUser(env.stack, { merchantId: m.merchantId }, 'developer');
    const b = await signedIn(user);
    const list = await b.get(KEYS);
    expect(list.text).toContain(`svc_ck_test_${m.secretKeyId}_…`);
    expect(list.text).not.toContain(m.secretKey);
    const created = await b.post(KEYS, { type: 'secret' });
    expect(created.status).toBe(201);
    const key = /id="new-key-value">([^<]+)</.exec(created.text)![1];
    const parsed = parseKey(key)!;
    expect([parsed.kind, parsed.mode]).toEqual(['ck', 'test']);
    const row = await env.stack.db('checkout_keys').where({ id: parsed.keyId }).first();
    expect([row.merchant_id, row.secret_hash]).toEqual([m.merchantId, hashSecret(parsed.secret)]);
    expect((await b.get(KEYS)).text).not.toContain(key);
    const works = async (k: string) =>
      (await call(env.stack.baseUrl, 'GET', '/v1/webhook_endpoints', { key: k })).status;
    expect(await works(key)).toBe(200);

    // Roll with a day's overlap: both keys work.
    await b.get(KEYS);
    const rolled = await b.post(`${KEYS}/${parsed.keyId}/roll`, { expires_in: '86400' });
    expect(rolled.status).toBe(201);
    const next = /id="new-key-value">([^<]+)</.exec(rolled.text)![1];
    expect([await works(key), await works(next)]).toEqual([200, 200]);
    const expires = (await env.stack.db('checkout_keys').where({ id: parsed.keyId }).first()).revoked_at as Date;
    expect(Math.abs(expires.getTime() - Date.now() - 86_400_000)).toBeLessThan(60_000);
    // Revoke the old one now: refused on the next request.
    expect((await b.post(`${KEYS}/${parsed.keyId}/revoke`)).status).toBe(200);
    expect([await works(key), await works(next)]).toEqual([401, 200]);
    // Roll with no overlap: the old key stops at once.
    const nextId = parseKey(next)!.keyId;
    const third = /id="new-key-value">([^<]+)</.exec(
      (await b.post(`${KEYS}/${nextId}/roll`, { expires_in: '0' })).text,
    )![1];
    expect([await works(next), await works(third)]).toEqual([401, 200]);
    // A publishable key too.
    const pk = /id="new-key-value">([^<]+)</.exec((await b.post(KEYS, { type: 'publishable' })).text)![1];
    expect(parseKey(pk)!.kind).toBe('pk');

    const audit = JSON.stringify(await auditRows(env.stack.db, user.id));
    for (const k of [key, next, third, pk]) expect(audit).not.toContain(parseKey(k)!.secret);
    expect(audit).toContain('checkout_key_roll');
  });

  it('the hosted page’s own key is neither listed nor rolled', async () => {
    const m = await buildMerchant(env.stack.db);
    const hostedId = parseKey(m.publishableKey)!.keyId;
    await env.stack.db('hosted_page_keys').insert({
      merchant_id: m.merchantId,
      mode: 'test',
      key_id: hostedId,
      key_ciphertext: 'sealed elsewhere',
      created_at: new Date(),
    });
    const b = await signedIn(await consoleUser(env.stack, { merchantId: m.merchantId }, 'owner'));
    expect((await b.get(KEYS)).text).not.toContain(hostedId);
    expect((await b.post(`${KEYS}/${hostedId}/roll`, { expires_in: '0' })).status).toBe(403);
    expect((await env.stack.db('checkout_keys').where({ id: hostedId }).first()).revoked_at).toBeNull();
  });

  it('creating a key needs password and code again', async () => {
    const m = await buildMerchant(env.stack.db);
    const user = await consoleUser(env.stack, { merchantId: m.merchantId }, 'owner');
    const b = await signedIn(user);
    env.stack.clock.advance(6 * 60_000);
    await b.get(KEYS);
    const stale = await b.post(KEYS, { type: 'secret' });
    expect([stale.status, stale.location]).toEqual([303, `/console/reauth?next=${encodeURIComponent(KEYS)}`]);
    expect(await env.stack.db('checkout_keys').where({ merchant_id: m.merchantId }).count()).toEqual([{ count: 2 }]);
  });
});

describe('Developers › Events', () => {
  it('lists the 30-day event log of this mode newest first, filtered by type or by undelivered, each with its payload escaped', async () => {
    const m = await buildMerchant(env.stack.db);
    const endpoint = await steps.createEndpoint(m.secretKey, env.receiver.url('/events'));
    const completed = await steps.sendTest(m.secretKey, endpoint.id, 'checkout.session.completed');
    const refunded = await steps.sendTest(m.secretKey, endpoint.id, 'refund.succeeded');
    const b = await signedIn(await consoleUser(env.stack, { merchantId: m.merchantId }, 'viewer'));
    const all = await b.get(EVENTS);
    expect(all.status).toBe(200);
    expect(all.text.indexOf(refunded)).toBeLessThan(all.text.indexOf(completed));
    expect(all.text).toContain('&quot;type&quot;: &quot;checkout.session.completed&quot;');
    const byType = await b.get(`${EVENTS}?type=refund.succeeded`);
    expect([byType.text.includes(refunded), byType.text.includes(completed)]).toEqual([true, false]);
    // Nothing has failed yet: the undelivered filter shows none.
    expect((await b.get(`${EVENTS}?failed=1`)).text).not.toContain(completed);
    expect((await b.get(`${EVENTS}?cursor=not-a-cursor`)).status).toBe(422);
    // The live mode has none of the test events.
    await b.post('/console/mode', { mode: 'live' });
    expect((await b.get(EVENTS)).text).not.toContain(completed);
  });
});

describe('merchant route × role matrix', () => {
  const ROLES = ['owner', 'developer', 'operator', 'viewer'] as const;
  interface Fixture {
    merchantId: string;
    endpointId: string;
    eventId: string;
    keyId: string;
  }
  /** Each action with the roles allowed and its success status (docs/console.md). */
  const ACTIONS: Array<{
    name: string;
    roles: readonly string[];
    path: (f: Fixture) => string;
    fields?: () => Record<string, string | string[]>;
    ok: number;
    /** No object of another tenant to aim at (it acts on one's own tenant only). */
    ownOnly?: boolean;
  }> = [
    {
      name: 'create endpoint',
      roles: ['owner', 'developer'],
      path: () => WEBHOOKS,
      fields: () => ({ url: env.receiver.url('/matrix'), events: ['*'] }),
      ok: 201,
      ownOnly: true,
    },
    {
      name: 'edit event types',
      roles: ['owner', 'developer'],
      path: (f) => `${WEBHOOKS}/${f.endpointId}/events`,
      fields: () => ({ events: ['refund.failed'] }),
      ok: 200,
    },
    {
      name: 'disable endpoint',
      roles: ['owner', 'developer'],
      path: (f) => `${WEBHOOKS}/${f.endpointId}/disable`,
      ok: 200,
    },
    {
      name: 'enable endpoint',
      roles: ['owner', 'developer'],
      path: (f) => `${WEBHOOKS}/${f.endpointId}/enable`,
      ok: 200,
    },
    {
      name: 'rotate secret',
      roles: ['owner', 'developer'],
      path: (f) => `${WEBHOOKS}/${f.endpointId}/rotate`,
      ok: 200,
    },
    {
      name: 'send test event',
      roles: ['owner', 'developer'],
      path: (f) => `${WEBHOOKS}/${f.endpointId}/test`,
      fields: () => ({ type: 'refund.failed' }),
      ok: 202,
    },
    {
      name: 'resend',
      roles: ['owner', 'developer'],
      path: (f) => `${WEBHOOKS}/${f.endpointId}/deliveries/${f.eventId}/resend`,
      ok: 202,
    },
    {
      name: 'recover',
      roles: ['owner', 'developer'],
      path: (f) => `${WEBHOOKS}/${f.endpointId}/recover`,
      fields: () => ({ since: new Date(env.stack.clock().getTime() - 3_600_000).toISOString() }),
      ok: 202,
    },
    {
      name: 'create key',
      roles: ['owner', 'developer'],
      path: () => KEYS,
      fields: () => ({ type: 'secret' }),
      ok: 201,
      ownOnly: true,
    },
    {
      name: 'roll key',
      roles: ['owner', 'developer'],
      path: (f) => `${KEYS}/${f.keyId}/roll`,
      fields: () => ({ expires_in: '3600' }),
      ok: 201,
    },
    { name: 'revoke key', roles: ['owner', 'developer'], path: (f) => `${KEYS}/${f.keyId}/revoke`, ok: 200 },
  ];

  /** A merchant with a test-mode endpoint, one event for it and a secret key. */
  const fixture = async (): Promise<Fixture> => {
    const m = await buildMerchant(env.stack.db);
    const endpoint = await steps.createEndpoint(m.secretKey, env.receiver.url('/matrix'));
    const eventId = await steps.sendTest(m.secretKey, endpoint.id);
    return { merchantId: m.merchantId, endpointId: endpoint.id, eventId, keyId: m.secretKeyId };
  };
  const snapshot = async (f: Fixture) => ({
    endpoints: await endpointsOf(f.merchantId).select('id', 'events', 'status', 'secret_ciphertext'),
    keys: await env.stack
      .db('checkout_keys')
      .where({ merchant_id: f.merchantId })
      .orderBy('id')
      .select('id', 'revoked_at'),
    events: await env.stack.db('events').where({ merchant_id: f.merchantId }).count(),
    queued: await env.stack.db('webhook_queue').where({ endpoint_id: f.endpointId }).count(),
    replays: await env.stack.db('webhook_replays').where({ merchant_id: f.merchantId }).count(),
  });

  for (const action of ACTIONS) {
    it(`${action.name}: ${action.roles.join(' and ')} only, their own merchant’s only, never without a session or CSRF token`, async () => {
      const theirs = await fixture();
      const outcomes: Record<string, number> = {};
      for (const role of ROLES) {
        const f = await fixture();
        const b = await signedIn(await consoleUser(env.stack, { merchantId: f.merchantId }, role));
        await b.get(WEBHOOKS);
        const before = await snapshot(f);
        // Without the page's token: refused, nothing changed.
        expect([role, (await b.post(action.path(f), action.fields?.(), { csrf: null })).status]).toEqual([role, 403]);
        expect(await snapshot(f)).toEqual(before);
        const res = await b.post(action.path(f), action.fields?.());
        outcomes[role] = res.status;
        if (!action.roles.includes(role)) expect(await snapshot(f)).toEqual(before);
        if (action.roles.includes(role) && !action.ownOnly) {
          const beforeTheirs = await snapshot(theirs);
          const cross = await b.post(action.path(theirs), action.fields?.());
          expect([role, 'other merchant', cross.status]).toEqual([role, 'other merchant', 403]);
          expect(await snapshot(theirs)).toEqual(beforeTheirs);
        }
      }
      expect(outcomes).toEqual(Object.fromEntries(ROLES.map((r) => [r, action.roles.includes(r) ? action.ok : 403])));
      // A seller's owner has no merchant pages at all.
      const seller = await buildSeller(env.stack.db);
      const s = await signedIn(await consoleUser(env.stack, { sellerId: seller.seller_id }, 'owner'));
      await s.get('/console/orders');
      const beforeTheirs = await snapshot(theirs);
      expect((await s.post(action.path(theirs), action.fields?.())).status).toBe(403);
      expect((await s.get(WEBHOOKS)).status).toBe(403);
      expect(await snapshot(theirs)).toEqual(beforeTheirs);
      // Signed out: 401, nothing done.
      const anon = browser();
      await anon.get('/console/sign-in');
      expect((await anon.post(action.path(theirs), action.fields?.())).status).toBe(401);
      // No state change on GET.
      if (!action.ownOnly) expect((await anon.get(action.path(theirs))).status).toBe(405);
    });
  }

  it('every merchant role reads the pages and switches the mode; the switch is refused to a seller', async () => {
    const f = await fixture();
    for (const role of ROLES) {
      const b = await signedIn(await consoleUser(env.stack, { merchantId: f.merchantId }, role));
      const pages = [WEBHOOKS, `${WEBHOOKS}/${f.endpointId}`, KEYS, EVENTS];
      for (const p of pages) expect([role, p, (await b.get(p)).status]).toEqual([role, p, 200]);
      expect([role, (await b.post('/console/mode', { mode: 'live', next: KEYS })).status]).toEqual([role, 303]);
    }
    const seller = await buildSeller(env.stack.db);
    const s = await signedIn(await consoleUser(env.stack, { sellerId: seller.seller_id }, 'owner'));
    await s.get('/console/orders');
    expect((await s.post('/console/mode', { mode: 'live' })).status).toBe(403);
    for (const p of [KEYS, EVENTS, `${WEBHOOKS}/${f.endpointId}`])
      expect([p, (await s.get(p)).status]).toEqual([p, 403]);
  });
});
