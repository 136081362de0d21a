import { totpCode } from '../../src/console/totp';
import { consoleActions } from '../../src/telemetry/console';
import { auditRows, ConsoleBrowser, consoleUser, TestConsoleUser } from '../helpers/console';
import { buildMerchant, buildSeller } from '../helpers/factories';
import { startStack, Stack } from '../helpers/stack';

/**
 * Settings › Users beyond invites and roles (docs/console.md): disabling a user (their sessions end
 * at once, they cannot sign in) and enabling them again, and the pending invites with revoke, over
 * real HTTP on the real app and Postgres, each action against every role, another tenant, no
 * session, no CSRF token and a GET.
 */
let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack.stop());

const USERS = '/console/settings/users';
const browser = () => new ConsoleBrowser(stack);
async function signedIn(user: TestConsoleUser) {
  const b = browser();
  await b.signIn(user);
  return b;
}
const counted = async (action: string, outcome: string) =>
  (await consoleActions.get()).values.find((v) => v.labels.action === action && v.labels.outcome === outcome)?.value ??
  0;
const userRow = (id: string) => stack.db('console_users').where({ id }).first('disabled_at', 'role');
const liveSessions = (userId: string) =>
  stack.db('console_sessions').where({ user_id: userId }).whereNull('revoked_at').pluck('id');

/** An invite made through the page; its link's path. */
async function invite(b: ConsoleBrowser, role = 'viewer') {
  await b.get(USERS);
  const email = `invitee-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}@shop.example`;
  const res = await b.post(`${USERS}/invite`, { email, role });
  expect(res.status).toBe(201);
  const path = new URL(/id="invite-link-value">([^<]+)</.exec(res.text)![1]).pathname;
  const row = await stack.db('console_invites').whereRaw('lower(email) = lower(?)', [email]).first('id');
  return { email, path, id: row.id as string };
}

describe('disabling and enabling a user', () => {
  it('ends every session of theirs at once and refuses their sign-in; enabled again, they sign in anew', async () => {
    const { seller_id } = await buildSeller(stack.db);
    const owner = await consoleUser(stack, { sellerId: seller_id }, 'owner');
    const dev = await consoleUser(stack, { sellerId: seller_id }, 'developer');
    const devLaptop = await signedIn(dev);
    const devPhone = await signedIn(dev);
    expect(await liveSessions(dev.id)).toHaveLength(2);
    const b = await signedIn(owner);
    const page = await b.get(USERS);
    expect(page.text).toContain(`action="${USERS}/${dev.id}/disable"`);
    expect(page.text).toContain(`aria-label="Disable ${dev.email}"`);
    // Not for oneself.
    expect(page.text).not.toContain(`${USERS}/${owner.id}/disable`);
    const before = await counted('user_disable', 'success');

    const disabled = await b.post(`${USERS}/${dev.id}/disable`);
    expect(disabled.status).toBe(200);
    expect(disabled.text).toContain(`${dev.email} is disabled: their sessions have ended and they cannot sign in.`);
    expect(disabled.text).toContain(`action="${USERS}/${dev.id}/enable"`);
    expect((await userRow(dev.id)).disabled_at).not.toBeNull();
    expect(await liveSessions(dev.id)).toEqual([]);
    // Their next request: signed out (a page goes to sign-in, a post is 401).
    expect((await devLaptop.get('/console/settings/integrations')).location).toBe('/console/sign-in');
    await devPhone.get('/console/sign-in');
    expect((await devPhone.post('/console/settings/integrations/keys', { scopes: ['orders:read'] })).status).toBe(401);
    // Their password no longer signs in.
    const again = browser();
    await again.get('/console/sign-in');
    expect((await again.post('/console/sign-in', { email: dev.email, password: dev.password })).status).toBe(401);
    expect(await counted('user_disable', 'success')).toBe(before + 1);

    // Disabling again changes nothing more.
    expect((await b.post(`${USERS}/${dev.id}/disable`)).status).toBe(200);

    const enabled = await b.post(`${USERS}/${dev.id}/enable`);
    expect(enabled.status).toBe(200);
    expect(enabled.text).toContain(`${dev.email} is enabled again and can sign in.`);
    expect((await userRow(dev.id)).disabled_at).toBeNull();
    // The old sessions stay ended; a new sign-in works.
    expect((await devLaptop.get('/console/settings/integrations')).location).toBe('/console/sign-in');
    await again.signIn(dev);
    expect((await again.get('/console/settings/integrations')).status).toBe(200);

    expect(
      (await auditRows(stack.db, owner.id))
        .filter((r) => r.action.startsWith('user_'))
        .map((r) => [r.action, r.outcome, r.target, r.detail]),
    ).toEqual([
      ['user_disable', 'success', dev.id, { email: dev.email, sessions_ended: 2 }],
      ['user_disable', 'success', dev.id, { email: dev.email, sessions_ended: 0 }],
      ['user_enable', 'success', dev.id, { email: dev.email }],
    ]);
  });

  it('never disables one’s own account (409); two owners disabling each other at once leave one owner', async () => {
    const { seller_id } = await buildSeller(stack.db);
    const a = await consoleUser(stack, { sellerId: seller_id }, 'owner');
    const z = await consoleUser(stack, { sellerId: seller_id }, 'owner');
    const ba = await signedIn(a);
    const bz = await signedIn(z);
    await ba.get(USERS);
    await bz.get(USERS);
    const own = await ba.post(`${USERS}/${a.id}/disable`);
    expect([own.status, own.text.includes('You cannot disable your own account.')]).toEqual([409, true]);
    expect((await userRow(a.id)).disabled_at).toBeNull();

    const [byA, byZ] = await Promise.all([ba.post(`${USERS}/${z.id}/disable`), bz.post(`${USERS}/${a.id}/disable`)]);
    expect([byA.status, byZ.status].sort()).toEqual([200, 403]);
    const left = await stack
      .db('console_users')
      .where({ seller_id, role: 'owner' })
      .whereNull('disabled_at')
      .pluck('id');
    expect(left).toEqual([byA.status === 200 ? a.id : z.id]);
  });
});

describe('pending invites', () => {
  it('lists the pending invites and revokes one: its link stops working, the others still work', async () => {
    const { seller_id } = await buildSeller(stack.db);
    const owner = await consoleUser(stack, { sellerId: seller_id }, 'owner');
    const b = await signedIn(owner);
    const kept = await invite(b, 'developer');
    const revoked = await invite(b, 'operator');
    const used = await invite(b);
    // One accepted: no longer pending.
    const acceptor = browser();
    const secret = /id="totp-key">([A-Z2-7]+)</.exec((await acceptor.get(used.path)).text)![1];
    const password = 'invited password 12';
    expect(
      (await acceptor.post(used.path, { password, password_again: password, code: totpCode(secret, stack.clock()) }))
        .status,
    ).toBe(201);
    // One expired: not listed.
    const expired = await invite(b);
    await stack
      .db('console_invites')
      .where({ id: expired.id })
      .update({ expires_at: new Date(stack.clock().getTime() - 1_000) });

    const page = await b.get(USERS);
    expect(page.text).toContain(`id="invite-${kept.id}"`);
    expect(page.text).toContain(`id="invite-${revoked.id}"`);
    expect(page.text).not.toContain(`id="invite-${used.id}"`);
    expect(page.text).not.toContain(`id="invite-${expired.id}"`);
    expect(page.text).toContain(`aria-label="Revoke ${revoked.email}"`);

    const res = await b.post(`${USERS}/invites/${revoked.id}/revoke`);
    expect(res.status).toBe(200);
    expect(res.text).toContain(`The invite for ${revoked.email} is revoked: its link no longer works.`);
    expect(res.text).not.toContain(`id="invite-${revoked.id}"`);
    expect((await stack.db('console_invites').where({ id: revoked.id }).first('revoked_at')).revoked_at).not.toBeNull();
    expect((await browser().get(revoked.path)).status).toBe(404);
    const late = browser();
    await late.get(kept.path);
    expect(
      (await late.post(revoked.path, { password, password_again: password, code: totpCode(secret, stack.clock()) }))
        .status,
    ).toBe(404);
    expect((await browser().get(kept.path)).status).toBe(200);

    // Revoked, used or expired: nothing to revoke (409).
    for (const gone of [revoked, used, expired])
      expect([gone.email, (await b.post(`${USERS}/invites/${gone.id}/revoke`)).status]).toEqual([gone.email, 409]);
    expect(
      (await auditRows(stack.db, owner.id))
        .filter((r) => r.action === 'invite_revoke')
        .map((r) => [r.outcome, r.target, r.detail]),
    ).toEqual([['success', revoked.id, { email: revoked.email, role: 'operator' }]]);
  });
});

describe('in Arabic and Kurdish', () => {
  it('shows the users’ state, their actions and the pending invites right to left', async () => {
    const { seller_id } = await buildSeller(stack.db);
    const owner = await consoleUser(stack, { sellerId: seller_id }, 'owner');
    const off = await consoleUser(stack, { sellerId: seller_id }, 'viewer');
    await stack.db('console_users').where({ id: off.id }).update({ disabled_at: stack.clock() });
    const b = await signedIn(owner);
    await invite(b);
    for (const [lang, texts] of [
      ['ar', ['الدعوات المعلّقة', 'معطّل', 'نشط', 'تفعيل', 'إلغاء']],
      ['ku', ['بانگهێشتە چاوەڕوانکراوەکان', 'ناچالاک', 'چالاک', 'چالاککردن', 'هەڵوەشاندنەوە']],
    ] as const) {
      const page = await b.get(`${USERS}?lang=${lang}`);
      expect(page.text).toContain(`<html lang="${lang === 'ar' ? 'ar' : 'ckb'}" dir="rtl">`);
      for (const text of texts) expect([lang, page.text.includes(text)]).toEqual([lang, true]);
    }
  });
});

describe('users route × role matrix', () => {
  const ROLES = ['owner', 'developer', 'operator', 'viewer'] as const;
  interface Fixture {
    sellerId: string;
    owner: TestConsoleUser;
    target: TestConsoleUser;
    disabled: TestConsoleUser;
    inviteId: string;
  }
  /** A seller with an owner, an enabled and a disabled user, and a pending invite. */
  const fixture = async (): Promise<Fixture> => {
    const { seller_id } = await buildSeller(stack.db);
    const owner = await consoleUser(stack, { sellerId: seller_id }, 'owner');
    const target = await consoleUser(stack, { sellerId: seller_id }, 'viewer');
    const disabled = await consoleUser(stack, { sellerId: seller_id }, 'operator');
    await stack.db('console_users').where({ id: disabled.id }).update({ disabled_at: stack.clock() });
    const b = await signedIn(owner);
    const { id } = await invite(b);
    return { sellerId: seller_id, owner, target, disabled, inviteId: id };
  };
  const snapshot = async (f: Fixture) => ({
    users: await stack.db('console_users').where({ seller_id: f.sellerId }).orderBy('id').select('id', 'disabled_at'),
    invites: await stack
      .db('console_invites')
      .where({ seller_id: f.sellerId })
      .orderBy('id')
      .select('id', 'revoked_at'),
    sessions: await stack
      .db('console_sessions as s')
      .join('console_users as u', 'u.id', 's.user_id')
      .where('u.seller_id', f.sellerId)
      .orderBy('s.id')
      .select('s.id', 's.revoked_at'),
  });
  const ACTIONS: Array<{ name: string; path: (f: Fixture) => string }> = [
    { name: 'disable a user', path: (f) => `${USERS}/${f.target.id}/disable` },
    { name: 'enable a user', path: (f) => `${USERS}/${f.disabled.id}/enable` },
    { name: 'revoke an invite', path: (f) => `${USERS}/invites/${f.inviteId}/revoke` },
  ];

  for (const action of ACTIONS) {
    it(`${action.name}: owners only, their own tenant’s only, re-authenticated, never without a session or CSRF token, never on GET`, async () => {
      const theirs = await fixture();
      for (const role of ROLES) {
        const f = await fixture();
        const user = role === 'owner' ? f.owner : await consoleUser(stack, { sellerId: f.sellerId }, role);
        const b = await signedIn(user);
        await b.get(role === 'owner' ? USERS : '/console/orders');
        const before = await snapshot(f);
        expect([role, (await b.post(action.path(f), {}, { csrf: null })).status]).toEqual([role, 403]);
        expect(await snapshot(f)).toEqual(before);
        const res = await b.post(action.path(f));
        expect([role, res.status]).toEqual([role, role === 'owner' ? 200 : 403]);
        if (role === 'owner') expect(await snapshot(f)).not.toEqual(before);
        else expect(await snapshot(f)).toEqual(before);
        // Another seller's user or invite: 403 even to an owner, nothing changed, audited as denied.
        const beforeTheirs = await snapshot(theirs);
        expect([role, 'other seller', (await b.post(action.path(theirs))).status]).toEqual([role, 'other seller', 403]);
        expect(await snapshot(theirs)).toEqual(beforeTheirs);
      }
      // A merchant's owner: not their tenant's either.
      const m = await buildMerchant(stack.db);
      const mb = await signedIn(await consoleUser(stack, { merchantId: m.merchantId }, 'owner'));
      await mb.get(USERS);
      const beforeTheirs = await snapshot(theirs);
      expect((await mb.post(action.path(theirs))).status).toBe(403);
      expect(await snapshot(theirs)).toEqual(beforeTheirs);
      // Re-authentication older than 5 minutes: to the reauth page, nothing done.
      const owner = await signedIn(theirs.owner);
      stack.clock.advance(6 * 60_000);
      await owner.get(USERS);
      const beforeStale = await snapshot(theirs);
      const stale = await owner.post(action.path(theirs));
      expect([stale.status, stale.location]).toEqual([303, '/console/reauth?next=%2Fconsole%2Fsettings%2Fusers']);
      expect(await snapshot(theirs)).toEqual(beforeStale);
      // Signed out: 401; a GET: 405.
      const anon = browser();
      await anon.get('/console/sign-in');
      expect((await anon.post(action.path(theirs))).status).toBe(401);
      expect((await owner.get(action.path(theirs))).status).toBe(405);
      expect(await snapshot(theirs)).toEqual(beforeStale);
    });
  }

  it('a merchant’s owner manages their own users the same way', async () => {
    const m = await buildMerchant(stack.db);
    const owner = await consoleUser(stack, { merchantId: m.merchantId }, 'owner');
    const dev = await consoleUser(stack, { merchantId: m.merchantId }, 'developer');
    const b = await signedIn(owner);
    await b.get(USERS);
    expect((await b.post(`${USERS}/${dev.id}/disable`)).status).toBe(200);
    expect((await userRow(dev.id)).disabled_at).not.toBeNull();
    expect((await b.post(`${USERS}/${dev.id}/enable`)).status).toBe(200);
    const { id } = await invite(b, 'developer');
    expect((await b.post(`${USERS}/invites/${id}/revoke`)).status).toBe(200);
    expect(
      (await auditRows(stack.db, owner.id))
        .filter((r) => ['user_disable', 'user_enable', 'invite_revoke'].includes(r.action))
        .map((r) => `${r.action}:${r.outcome}`),
    ).toEqual(['user_disable:success', 'user_enable:success', 'invite_revoke:success']);
  });
});
