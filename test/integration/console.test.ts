import { tokenHash } from '../../src/console/tokens';
import { totpCode } from '../../src/console/totp';
import { buildMerchant, buildSeller } from '../helpers/factories';
import { auditRows, ConsoleBrowser, consoleUser, TestConsoleUser } from '../helpers/console';
import { call } from '../helpers/http';
import { ops, partnerClient, uniqueSku } from '../helpers/partner';
import { startStack, Stack } from '../helpers/stack';

/**
 * The console (docs/console.md) over real HTTP on the real app and Postgres: invites, sign-in with
 * password and TOTP, sessions and their timeouts, the CSRF and origin checks, the headers and
 * cookie flags, and every action against every role and another tenant.
 */
let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack.stop());

const browser = () => new ConsoleBrowser(stack);

async function signedIn(user: TestConsoleUser) {
  const b = browser();
  await b.signIn(user);
  return b;
}

/**
 * A seller with a draft product, a rejected one (reviewed through the operator CLI) and a pending
 * order placed through the operator CLI.
 */
async function sellerWithOrder() {
  const seller = await buildSeller(stack.db);
  const sku = uniqueSku();
  const rejectedSku = uniqueSku();
  await partnerClient(stack.baseUrl, seller.key).bulkProducts({
    items: [
      { external_sku: sku, title: 'Desk lamp', price_iqd: 25000 },
      { external_sku: rejectedSku, title: 'Floor lamp', price_iqd: 45000 },
    ],
  });
  const productOf = async (s: string) =>
    (await stack.db('variants').where({ seller_id: seller.seller_id, sku: s }).first('product_id'))
      .product_id as string;
  const rejectedId = await productOf(rejectedSku);
  await ops(stack.db, 'product', 'submit', '--product', rejectedId);
  await ops(stack.db, 'product', 'reject', '--product', rejectedId, '--reason', 'Photos missing');
  const order = await ops(stack.db, 'order', 'create', '--seller', seller.seller_id, '--items', `${sku}:1`);
  return { seller, orderId: order.order_id as string, sku, rejectedSku, draftId: await productOf(sku), rejectedId };
}

describe('invites and sign-in', () => {
  it('an operator invite opens once; the user sets a password and TOTP, gets recovery codes and a session cookie', async () => {
    const seller = await buildSeller(stack.db);
    const invite = await ops(
      stack.db,
      'console-user',
      'invite',
      '--seller',
      seller.seller_id,
      '--email',
      'Owner@Shop.example',
      '--role',
      'owner',
    );
    expect(invite.link).toMatch(/\/console\/invite\/[A-Za-z0-9_-]{43}$/);
    const token = invite.link.split('/').at(-1);
    // Only the hash is stored.
    const row = await stack.db('console_invites').where({ id: invite.invite_id }).first();
    expect(row.token_hash).toBe(tokenHash(token));
    expect(JSON.stringify(row)).not.toContain(token);

    const b = browser();
    const page = await b.get(`/console/invite/${token}`);
    expect(page.status).toBe(200);
    const secret = /id="totp-key">([A-Z2-7]+)</.exec(page.text)![1];
    // A short password is refused and nothing is used up.
    expect(
      (await b.post(`/console/invite/${token}`, { password: 'short', password_again: 'short', code: '000000' })).status,
    ).toBe(422);
    const wrongCode = await b.post(`/console/invite/${token}`, {
      password: 'a long enough password',
      password_again: 'a long enough password',
      code: '000000',
    });
    expect(wrongCode.status).toBe(422);
    const accepted = await b.post(`/console/invite/${token}`, {
      password: 'a long enough password',
      password_again: 'a long enough password',
      code: totpCode(secret, stack.clock()),
    });
    expect(accepted.status).toBe(201);
    expect(accepted.text.match(/<li>[a-z2-9]{5}-[a-z2-9]{5}<\/li>/g)).toHaveLength(10);
    const cookie = accepted.headers.getSetCookie().find((c) => c.startsWith('__Host-console_session='))!;
    expect(cookie.split('; ').slice(1).sort()).toEqual(['HttpOnly', 'Path=/', 'SameSite=Strict', 'Secure']);
    expect((await b.get('/console/orders')).status).toBe(200);

    // The link works once.
    expect((await browser().get(`/console/invite/${token}`)).status).toBe(404);
    const user = await stack.db('console_users').where({ email: 'Owner@Shop.example' }).first();
    expect([user.role, user.seller_id, user.password_hash.startsWith('$argon2id$')]).toEqual([
      'owner',
      seller.seller_id,
      true,
    ]);
    expect(user.totp_ciphertext).not.toContain(secret);
  });

  it('signs in with password and a TOTP code; a wrong password, a wrong or reused code are refused', async () => {
    const { seller_id } = await buildSeller(stack.db);
    const user = await consoleUser(stack, { sellerId: seller_id }, 'viewer');
    const b = browser();
    await b.get('/console/sign-in');
    const wrong = await b.post('/console/sign-in', { email: user.email, password: 'not the password' });
    expect(wrong.status).toBe(401);
    expect(wrong.text).toContain('The e-mail or password is not right.');
    const unknown = await b.post('/console/sign-in', { email: 'nobody@example.com', password: 'whatever it is' });
    expect(unknown.status).toBe(401);

    const first = await b.post('/console/sign-in', { email: user.email.toUpperCase(), password: user.password });
    expect([first.status, first.location]).toEqual([303, '/console/sign-in/verify']);
    // Only the password: no page but the second step.
    expect((await b.get('/console/orders')).location).toBe('/console/sign-in');
    await b.get('/console/sign-in/verify');
    expect((await b.post('/console/sign-in/verify', { code: '123456' })).status).toBe(401);
    const code = b.nextCode(user);
    const pendingCookie = b.cookies.get('__Host-console_session');
    const ok = await b.post('/console/sign-in/verify', { code });
    expect([ok.status, ok.location]).toEqual([303, '/console']);
    // A new token after the second factor: the password step's cookie opens nothing.
    expect(b.cookies.get('__Host-console_session')).not.toBe(pendingCookie);
    expect((await b.get('/console/orders')).status).toBe(200);

    // The same code again (same 30 s step) is refused in another sign-in.
    const other = browser();
    await other.get('/console/sign-in');
    await other.post('/console/sign-in', { email: user.email, password: user.password });
    await other.get('/console/sign-in/verify');
    expect((await other.post('/console/sign-in/verify', { code })).status).toBe(401);

    expect((await auditRows(stack.db, user.id)).map((r) => `${r.action}:${r.outcome}`)).toEqual([
      'second_factor:failed',
      'sign_in:success',
      'second_factor:failed',
    ]);
    const failed = await stack
      .db('console_audit_log')
      .where({ actor_email: user.email, action: 'sign_in', outcome: 'failed' });
    expect(failed).toHaveLength(1);
    expect(JSON.stringify(failed)).not.toContain('not the password');
  });

  it('a recovery code stands in for the TOTP code, once', async () => {
    const seller = await buildSeller(stack.db);
    const invite = await ops(
      stack.db,
      'console-user',
      'invite',
      '--seller',
      seller.seller_id,
      '--email',
      `r-${Date.now()}@x.example`,
      '--role',
      'operator',
    );
    const token = invite.link.split('/').at(-1);
    const b = browser();
    const secret = /id="totp-key">([A-Z2-7]+)</.exec((await b.get(`/console/invite/${token}`)).text)![1];
    const done = await b.post(`/console/invite/${token}`, {
      password: 'recovery test password',
      password_again: 'recovery test password',
      code: totpCode(secret, stack.clock()),
    });
    const recovery = /<li>([a-z2-9]{5}-[a-z2-9]{5})<\/li>/.exec(done.text)![1];
    const again = async () => {
      const c = browser();
      await c.get('/console/sign-in');
      await c.post('/console/sign-in', { email: invite.email, password: 'recovery test password' });
      await c.get('/console/sign-in/verify');
      return c.post('/console/sign-in/verify', { code: recovery.toUpperCase() });
    };
    expect((await again()).status).toBe(303);
    expect((await again()).status).toBe(401);
  });

  it('throttles sign-in tries per e-mail: the 11th in 15 minutes is 429 with Retry-After', async () => {
    const { seller_id } = await buildSeller(stack.db);
    const user = await consoleUser(stack, { sellerId: seller_id }, 'viewer');
    const b = browser();
    await b.get('/console/sign-in');
    for (let i = 0; i < 10; i++)
      expect((await b.post('/console/sign-in', { email: user.email, password: 'wrong password!' })).status).toBe(401);
    const refused = await b.post('/console/sign-in', { email: user.email, password: user.password });
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(b.cookies.has('__Host-console_session')).toBe(false);
  });
});

describe('sessions', () => {
  it('ends after 30 minutes idle', async () => {
    const { seller_id } = await buildSeller(stack.db);
    const b = await signedIn(await consoleUser(stack, { sellerId: seller_id }, 'viewer'));
    stack.clock.advance(29 * 60_000);
    expect((await b.get('/console/orders')).status).toBe(200);
    stack.clock.advance(31 * 60_000);
    const res = await b.get('/console/orders');
    expect([res.status, res.location]).toEqual([303, '/console/sign-in']);
  });

  it('ends 12 hours after sign-in however active', async () => {
    const { seller_id } = await buildSeller(stack.db);
    const b = await signedIn(await consoleUser(stack, { sellerId: seller_id }, 'viewer'));
    for (let hours = 0; hours < 11.5; hours += 0.25) {
      stack.clock.advance(15 * 60_000);
      expect((await b.get('/console/orders')).status).toBe(200);
    }
    stack.clock.advance(45 * 60_000);
    expect((await b.get('/console/orders')).location).toBe('/console/sign-in');
  });

  it('lists one’s sessions and revokes another one; sign-out ends this one', async () => {
    const { seller_id } = await buildSeller(stack.db);
    const user = await consoleUser(stack, { sellerId: seller_id }, 'viewer');
    const phone = await signedIn(user);
    const laptop = await signedIn(user);
    const list = await laptop.get('/console/account/sessions');
    const ids = [...list.text.matchAll(/\/console\/account\/sessions\/(csess_[A-Za-z0-9_]+)\/revoke/g)].map(
      (m) => m[1],
    );
    expect(ids).toHaveLength(1);
    expect((await laptop.post(`/console/account/sessions/${ids[0]}/revoke`)).status).toBe(303);
    expect((await phone.get('/console/orders')).location).toBe('/console/sign-in');
    expect((await laptop.post('/console/sign-out')).location).toBe('/console/sign-in');
    expect((await laptop.get('/console/orders')).location).toBe('/console/sign-in');
    // Another user's session cannot be revoked.
    const other = await signedIn(await consoleUser(stack, { sellerId: seller_id }, 'owner'));
    const mine = await stack.db('console_sessions').where({ user_id: user.id }).whereNull('revoked_at').first('id');
    if (mine) expect((await other.post(`/console/account/sessions/${mine.id}/revoke`)).status).toBe(403);
  });
});

describe('security', () => {
  it('sends the strict headers on every page, signed in or not', async () => {
    const { seller_id } = await buildSeller(stack.db);
    const b = browser();
    const pages = [await b.get('/console/sign-in'), await b.get('/console/nowhere')];
    await b.signIn(await consoleUser(stack, { sellerId: seller_id }, 'owner'));
    pages.push(await b.get('/console/settings/integrations'), await b.get('/console/orders'));
    for (const res of pages) {
      const csp = res.headers.get('content-security-policy')!;
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).not.toMatch(/unsafe-inline|unsafe-eval/);
      expect(res.headers.get('strict-transport-security')).toBe('max-age=63072000; includeSubDomains');
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      expect(res.headers.get('x-frame-options')).toBe('DENY');
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(res.text).not.toMatch(/<script(?![^>]*\bsrc=)/);
    }
    expect(pages[1].status).toBe(404);
    const csrfCookie = (await browser().get('/console/sign-in')).headers
      .getSetCookie()
      .find((c) => c.startsWith('__Host-console_csrf='))!;
    expect(csrfCookie.split('; ').slice(1).sort()).toEqual(['HttpOnly', 'Path=/', 'SameSite=Strict', 'Secure']);
  });

  it('refuses a post without the CSRF token, with another site’s token, Origin or Sec-Fetch-Site, and changes nothing', async () => {
    const { seller_id } = await buildSeller(stack.db);
    const user = await consoleUser(stack, { sellerId: seller_id }, 'owner');
    const b = await signedIn(user);
    await b.get('/console/settings/integrations');
    const keysBefore = await stack.db('partner_keys').where({ seller_id }).count();
    const create = { scopes: ['orders:read'] };
    const refusals = [
      await b.post('/console/settings/integrations/keys', create, { csrf: null }),
      await b.post('/console/settings/integrations/keys', create, { csrf: 'x'.repeat(43) }),
      await b.post('/console/settings/integrations/keys', create, { origin: 'https://evil.example' }),
      await b.post('/console/settings/integrations/keys', create, { origin: null, fetchSite: null }),
      await b.post('/console/settings/integrations/keys', create, { fetchSite: 'cross-site' }),
      // Before sign-in too: the sign-in form itself.
      await browser().post('/console/sign-in', { email: user.email, password: user.password }, { csrf: 'forged' }),
    ];
    expect(refusals.map((r) => r.status)).toEqual([403, 403, 403, 403, 403, 403]);
    expect(refusals[0].text).toContain('Request refused');
    expect(await stack.db('partner_keys').where({ seller_id }).count()).toEqual(keysBefore);
    // The same post with the token, from the console: done.
    expect((await b.post('/console/settings/integrations/keys', create)).status).toBe(201);
  });

  it('changes nothing on GET: every action URL answers 405 to a GET', async () => {
    const { seller, orderId } = await sellerWithOrder();
    const b = await signedIn(await consoleUser(stack, { sellerId: seller.seller_id }, 'owner'));
    for (const path of [
      '/console/sign-out',
      '/console/settings/integrations/keys',
      `/console/settings/integrations/keys/${seller.keyId}/revoke`,
      `/console/orders/${orderId}/accept`,
      `/console/orders/${orderId}/cancel`,
    ]) {
      expect([path, (await b.get(path)).status]).toEqual([path, 405]);
    }
    expect((await stack.db('orders').where({ id: orderId }).first()).status).toBe('pending');
    expect((await stack.db('partner_keys').where({ id: seller.keyId }).first()).revoked_at).toBeNull();
  });

  it('escapes what it shows', async () => {
    const seller = await buildSeller(stack.db);
    const sku = uniqueSku();
    await partnerClient(stack.baseUrl, seller.key).bulkProducts({
      items: [{ external_sku: sku, title: '<img src=x onerror=alert(1)>', price_iqd: 1000 }],
    });
    const order = await ops(stack.db, 'order', 'create', '--seller', seller.seller_id, '--items', `${sku}:1`);
    const b = await signedIn(await consoleUser(stack, { sellerId: seller.seller_id }, 'viewer'));
    const page = await b.get(`/console/orders/${order.order_id}`);
    expect(page.text).toContain('&lt;img src=x onerror=alert(1)&gt;');
    expect(page.text).not.toContain('<img src=x');
  });
});

describe('Settings › Integrations', () => {
  it('creates a key shown once (only its hash kept) that works on the Partner API, re-scopes and revokes it', async () => {
    const { seller_id } = await buildSeller(stack.db);
    const user = await consoleUser(stack, { sellerId: seller_id }, 'developer');
    const b = await signedIn(user);
    await b.get('/console/settings/integrations');
    const created = await b.post('/console/settings/integrations/keys', { scopes: ['orders:read', 'catalog:read'] });
    expect(created.status).toBe(201);
    const key = /id="new-key-value">(svc_sk_test_[A-Za-z0-9_-]+)</.exec(created.text)![1];
    const keyId = key.slice('svc_sk_test_'.length, 'svc_sk_test_'.length + 12);
    const row = await stack.db('partner_keys').where({ id: keyId }).first();
    expect([row.seller_id, row.scopes]).toEqual([seller_id, ['catalog:read', 'orders:read']]);
    expect(JSON.stringify(row)).not.toContain(key.slice(-32));
    // Shown once: the page read again does not show it.
    expect((await b.get('/console/settings/integrations')).text).not.toContain(key);

    expect((await call(stack.baseUrl, 'GET', '/partner/v1/orders', { key })).status).toBe(200);
    expect((await call(stack.baseUrl, 'GET', '/partner/v1/products', { key })).status).toBe(200);
    expect(
      (await b.post(`/console/settings/integrations/keys/${keyId}/scopes`, { scopes: ['orders:read'] })).status,
    ).toBe(200);
    expect((await call(stack.baseUrl, 'GET', '/partner/v1/products', { key })).status).toBe(403);
    expect((await b.post(`/console/settings/integrations/keys/${keyId}/revoke`)).status).toBe(200);
    expect((await call(stack.baseUrl, 'GET', '/partner/v1/orders', { key })).status).toBe(401);

    const rows = await auditRows(stack.db, user.id);
    expect(rows.slice(1).map((r) => [r.action, r.outcome, r.target])).toEqual([
      ['partner_key_create', 'success', keyId],
      ['partner_key_rescope', 'success', keyId],
      ['partner_key_revoke', 'success', keyId],
    ]);
    expect(JSON.stringify(rows)).not.toContain(key.slice(-32));
  });

  it('asks for password and code again when the last were more than 5 minutes ago', async () => {
    const { seller_id } = await buildSeller(stack.db);
    const user = await consoleUser(stack, { sellerId: seller_id }, 'owner');
    const b = await signedIn(user);
    stack.clock.advance(6 * 60_000);
    await b.get('/console/settings/integrations');
    const stale = await b.post('/console/settings/integrations/keys', { scopes: ['orders:read'] });
    expect([stale.status, stale.location]).toEqual([303, '/console/reauth?next=%2Fconsole%2Fsettings%2Fintegrations']);
    await b.get(stale.location!);
    const wrong = await b.post(stale.location!, { password: user.password, code: '000000' });
    expect(wrong.status).toBe(401);
    const ok = await b.post(stale.location!, { password: user.password, code: b.nextCode(user) });
    expect([ok.status, ok.location]).toEqual([303, '/console/settings/integrations']);
    await b.get('/console/settings/integrations');
    expect((await b.post('/console/settings/integrations/keys', { scopes: ['orders:read'] })).status).toBe(201);
  });
});

describe('orders', () => {
  it('accepts and ships an order, which the Partner API then shows as shipped with the tracking number', async () => {
    const { seller, orderId } = await sellerWithOrder();
    const b = await signedIn(await consoleUser(stack, { sellerId: seller.seller_id }, 'operator'));
    expect((await b.get('/console/orders?status=pending')).text).toContain(`/console/orders/${orderId}`);
    await b.get(`/console/orders/${orderId}`);
    const accepted = await b.post(`/console/orders/${orderId}/accept`);
    expect(accepted.status).toBe(200);
    // Its language links lead to the order's page it was posted from, not the action's URL (405 to a GET).
    expect(accepted.text).toContain(`href="/console/orders/${orderId}?lang=ar"`);
    expect(accepted.text).not.toContain(`href="/console/orders/${orderId}/accept?lang=`);
    // Accepting again is not a move.
    expect((await b.post(`/console/orders/${orderId}/accept`)).status).toBe(409);
    expect((await b.post(`/console/orders/${orderId}/ship`, { carrier: 'Aramex' })).status).toBe(422);
    // A null character (which Postgres text cannot hold) is refused with the form, not a 500 at the write.
    const nul = await b.post(`/console/orders/${orderId}/ship`, { carrier: 'Ara\u0000mex', tracking_number: 'AX123' });
    expect([nul.status, nul.text.includes('a null character')]).toEqual([400, true]);
    expect((await stack.db('orders').where({ id: orderId }).first()).status).toBe('accepted');
    const shipped = await b.post(`/console/orders/${orderId}/ship`, { carrier: 'Aramex', tracking_number: 'AX123' });
    expect(shipped.status).toBe(200);
    expect(shipped.text).toContain('Order shipped.');
    const api = await call(stack.baseUrl, 'GET', `/partner/v1/orders/${orderId}`, { key: seller.key });
    expect([api.body.status, api.body.carrier, api.body.tracking_number]).toEqual(['shipped', 'Aramex', 'AX123']);
    expect((await b.post(`/console/orders/${orderId}/cancel`, { reason: 'too late' })).status).toBe(409);
  });

  it('cancels with a reason (kept in the audit log), which reverses the held settlement', async () => {
    const { seller, orderId } = await sellerWithOrder();
    const user = await consoleUser(stack, { sellerId: seller.seller_id }, 'owner');
    const b = await signedIn(user);
    await b.get(`/console/orders/${orderId}`);
    expect((await b.post(`/console/orders/${orderId}/cancel`, {})).status).toBe(422);
    expect((await b.post(`/console/orders/${orderId}/cancel`, { reason: 'Out of stock' })).status).toBe(200);
    const api = await call(stack.baseUrl, 'GET', `/partner/v1/orders/${orderId}`, { key: seller.key });
    expect([api.body.status, api.body.settlement.status]).toEqual(['cancelled', 'reversed']);
    const rows = await auditRows(stack.db, user.id);
    expect(rows.at(-1)).toMatchObject({
      action: 'order_cancel',
      outcome: 'success',
      target: orderId,
      detail: { reason: 'Out of stock' },
    });
  });
});

describe('products', () => {
  it('submits a draft for review and resubmits a rejected product showing why it was rejected; the Partner API sees both proposed', async () => {
    const { seller, sku, rejectedSku, draftId, rejectedId } = await sellerWithOrder();
    const user = await consoleUser(stack, { sellerId: seller.seller_id }, 'operator');
    const b = await signedIn(user);
    expect((await b.get('/console/products?status=draft')).text).toContain(`/console/products/${draftId}`);
    const found = await b.get(`/console/products?sku=${encodeURIComponent(rejectedSku)}`);
    expect(found.text).toContain(`/console/products/${rejectedId}`);
    expect(found.text).not.toContain(`/console/products/${draftId}`);

    await b.get(`/console/products/${draftId}`);
    expect((await b.post(`/console/products/${draftId}/resubmit`)).status).toBe(409);
    const submitted = await b.post(`/console/products/${draftId}/submit`);
    expect(submitted.status).toBe(200);
    expect(submitted.text).toContain('Submitted for review.');
    expect((await b.post(`/console/products/${draftId}/submit`)).status).toBe(409);

    const rejected = await b.get(`/console/products/${rejectedId}`);
    expect(rejected.text).toContain('<span id="rejection-reason">Photos missing</span>');
    expect((await b.post(`/console/products/${rejectedId}/resubmit`)).status).toBe(200);

    for (const s of [sku, rejectedSku]) {
      const res = await call(stack.baseUrl, 'GET', `/partner/v1/products/${encodeURIComponent(s)}`, {
        key: seller.key,
      });
      expect([s, res.body.status, res.body.rejection_reason ?? null]).toEqual([s, 'proposed', null]);
    }
    expect((await auditRows(stack.db, user.id)).slice(1).map((r) => `${r.action}:${r.outcome}`)).toEqual([
      'product_submit:success',
      'product_resubmit:success',
    ]);
  });
});

describe('Settings › Users', () => {
  it('an owner invites a developer (link shown once), changes their role, and the new role holds on the next request', async () => {
    const { seller_id } = await buildSeller(stack.db);
    const owner = await consoleUser(stack, { sellerId: seller_id }, 'owner');
    const b = await signedIn(owner);
    await b.get('/console/settings/users');
    const email = `dev-${Date.now()}@shop.example`;
    const invited = await b.post('/console/settings/users/invite', { email, role: 'developer' });
    expect(invited.status).toBe(201);
    const link = /id="invite-link-value">([^<]+)</.exec(invited.text)![1];
    expect(link).toMatch(new RegExp(`^${stack.baseUrl}/console/invite/[A-Za-z0-9_-]{43}$`));
    expect((await b.get('/console/settings/users')).text).not.toContain(link);

    const dev = browser();
    const path = new URL(link).pathname;
    const secret = /id="totp-key">([A-Z2-7]+)</.exec((await dev.get(path)).text)![1];
    const password = 'developer password 1';
    expect(
      (await dev.post(path, { password, password_again: password, code: totpCode(secret, stack.clock()) })).status,
    ).toBe(201);
    const devRow = await stack.db('console_users').whereRaw('lower(email) = lower(?)', [email]).first();
    expect([devRow.role, devRow.seller_id]).toEqual(['developer', seller_id]);
    await dev.get('/console/settings/integrations');
    expect((await dev.post('/console/settings/integrations/keys', { scopes: ['orders:read'] })).status).toBe(201);

    await b.get('/console/settings/users');
    const changed = await b.post(`/console/settings/users/${devRow.id}/role`, { role: 'viewer' });
    expect(changed.status).toBe(200);
    expect(changed.text).toContain(`Role of ${email} changed to viewer.`);
    expect((await dev.post('/console/settings/integrations/keys', { scopes: ['orders:read'] })).status).toBe(403);
    // One's own role is not changed here.
    expect((await b.post(`/console/settings/users/${owner.id}/role`, { role: 'viewer' })).status).toBe(409);
    expect((await auditRows(stack.db, owner.id)).slice(1).map((r) => [r.action, r.outcome, r.detail])).toEqual([
      ['user_invite', 'success', { email, role: 'developer' }],
      ['role_change', 'success', { from: 'developer', to: 'viewer' }],
    ]);
  });

  it('only owners manage users, only their own tenant’s, and re-authenticated', async () => {
    const { seller_id } = await buildSeller(stack.db);
    const other = await buildSeller(stack.db);
    const stranger = await consoleUser(stack, { sellerId: other.seller_id }, 'viewer');
    const target = await consoleUser(stack, { sellerId: seller_id }, 'viewer');
    for (const role of ['developer', 'operator', 'viewer'] as const) {
      const b = await signedIn(await consoleUser(stack, { sellerId: seller_id }, role));
      expect([role, (await b.get('/console/settings/users')).status]).toEqual([role, 403]);
      await b.get('/console/orders');
      expect(
        (await b.post('/console/settings/users/invite', { email: `x-${role}@y.example`, role: 'owner' })).status,
      ).toBe(403);
      expect((await b.post(`/console/settings/users/${target.id}/role`, { role: 'owner' })).status).toBe(403);
    }
    const owner = await signedIn(await consoleUser(stack, { sellerId: seller_id }, 'owner'));
    await owner.get('/console/settings/users');
    expect((await owner.post(`/console/settings/users/${stranger.id}/role`, { role: 'owner' })).status).toBe(403);
    expect((await stack.db('console_users').where({ id: stranger.id }).first()).role).toBe('viewer');
    expect((await stack.db('console_users').where({ id: target.id }).first()).role).toBe('viewer');
    stack.clock.advance(6 * 60_000);
    const stale = await owner.post(`/console/settings/users/${target.id}/role`, { role: 'operator' });
    expect([stale.status, stale.location]).toEqual([303, '/console/reauth?next=%2Fconsole%2Fsettings%2Fusers']);
    expect((await stack.db('console_users').where({ id: target.id }).first()).role).toBe('viewer');
  });
});

describe('route × role matrix', () => {
  const ROLES = ['owner', 'developer', 'operator', 'viewer'] as const;
  /** Each action with the roles allowed to do it (docs/console.md). */
  const ACTIONS: Array<{
    name: string;
    roles: readonly string[];
    path: (f: Fixture) => string;
    fields?: Record<string, string | string[]>;
    ok: number;
  }> = [
    {
      name: 'create key',
      roles: ['owner', 'developer'],
      path: () => '/console/settings/integrations/keys',
      fields: { scopes: ['orders:read'] },
      ok: 201,
    },
    {
      name: 're-scope key',
      roles: ['owner', 'developer'],
      path: (f) => `/console/settings/integrations/keys/${f.keyId}/scopes`,
      fields: { scopes: ['orders:read'] },
      ok: 200,
    },
    {
      name: 'revoke key',
      roles: ['owner', 'developer'],
      path: (f) => `/console/settings/integrations/keys/${f.keyId}/revoke`,
      ok: 200,
    },
    { name: 'accept order', roles: ['owner', 'operator'], path: (f) => `/console/orders/${f.orderId}/accept`, ok: 200 },
    {
      name: 'ship order',
      roles: ['owner', 'operator'],
      path: (f) => `/console/orders/${f.orderId}/ship`,
      fields: { carrier: 'DHL', tracking_number: 'T1' },
      ok: 200,
    },
    {
      name: 'submit product',
      roles: ['owner', 'operator'],
      path: (f) => `/console/products/${f.draftId}/submit`,
      ok: 200,
    },
    {
      name: 'resubmit product',
      roles: ['owner', 'operator'],
      path: (f) => `/console/products/${f.rejectedId}/resubmit`,
      ok: 200,
    },
    {
      name: 'cancel order',
      roles: ['owner', 'operator'],
      path: (f) => `/console/orders/${f.orderId}/cancel`,
      fields: { reason: 'test' },
      ok: 200,
    },
  ];
  interface Fixture {
    sellerId: string;
    keyId: string;
    orderId: string;
    draftId: string;
    rejectedId: string;
  }
  const fixture = async (): Promise<Fixture> => {
    const { seller, orderId, draftId, rejectedId } = await sellerWithOrder();
    return { sellerId: seller.seller_id, keyId: seller.keyId, orderId, draftId, rejectedId };
  };
  const snapshot = async (f: Fixture) => ({
    products: await stack.db('products').where({ seller_id: f.sellerId }).orderBy('id').select('id', 'status'),
    keys: await stack
      .db('partner_keys')
      .where({ seller_id: f.sellerId })
      .orderBy('id')
      .select('id', 'scopes', 'revoked_at'),
    order: await stack.db('orders').where({ id: f.orderId }).first('status', 'carrier'),
  });

  for (const action of ACTIONS) {
    it(`${action.name}: ${action.roles.join(' and ')} only, and only their own seller’s`, async () => {
      const mine = await fixture();
      const theirs = await fixture();
      const merchant = await buildMerchant(stack.db);
      const outcomes: Record<string, number> = {};
      for (const role of ROLES) {
        const f = await fixture();
        const b = await signedIn(await consoleUser(stack, { sellerId: f.sellerId }, role));
        await b.get('/console/orders');
        const before = await snapshot(f);
        const res = await b.post(action.path(f), action.fields);
        outcomes[role] = res.status;
        if (!action.roles.includes(role)) expect(await snapshot(f)).toEqual(before);
        // Another seller's object, by an allowed role: refused the same way, nothing changed.
        if (action.roles.includes(role)) {
          const beforeTheirs = await snapshot(theirs);
          const cross = await b.post(action.path(theirs), action.fields);
          if (action.name !== 'create key') {
            expect([role, 'other seller', cross.status]).toEqual([role, 'other seller', 403]);
            expect(await snapshot(theirs)).toEqual(beforeTheirs);
          }
        }
      }
      expect(outcomes).toEqual(Object.fromEntries(ROLES.map((r) => [r, action.roles.includes(r) ? action.ok : 403])));
      // A merchant's owner has no seller pages at all.
      const m = await signedIn(await consoleUser(stack, { merchantId: merchant.merchantId }, 'owner'));
      await m.get('/console');
      expect((await m.post(action.path(mine), action.fields)).status).toBe(403);
      // Signed out: 401, nothing done.
      const anon = browser();
      await anon.get('/console/sign-in');
      expect((await anon.post(action.path(mine), action.fields)).status).toBe(401);
    });
  }

  it('the audit log is for owners only', async () => {
    const { seller_id } = await buildSeller(stack.db);
    for (const role of ROLES) {
      const b = await signedIn(await consoleUser(stack, { sellerId: seller_id }, role));
      expect([role, (await b.get('/console/audit')).status]).toEqual([role, role === 'owner' ? 200 : 403]);
    }
  });
});
