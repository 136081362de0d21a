import { consoleActions } from '../../src/telemetry/console';
import { buildMerchant, buildSeller } from '../helpers/factories';
import { auditRows, ConsoleBrowser, consoleUser, TestConsoleUser } from '../helpers/console';
import { SoftwareAuthenticator, strayChallenge } from '../helpers/software-authenticator';
import { startStack, Stack } from '../helpers/stack';

/**
 * Console passkeys (docs/console.md) over real HTTP on the real app and Postgres, with an
 * authenticator in the test's process: Account › Security (register, list, remove; re-authentication,
 * CSRF), and a passkey as the sign-in's second factor (its challenge bound to the session and used
 * once, the counter checked, tries throttled with the codes').
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

async function owner() {
  const { seller_id } = await buildSeller(stack.db);
  return consoleUser(stack, { sellerId: seller_id }, 'owner');
}

const counted = async (action: string, outcome: string) =>
  (await consoleActions.get()).values.find((v) => v.labels.action === action && v.labels.outcome === outcome)?.value ??
  0;

/** Registration options through the route (the page read first, for its CSRF token). */
async function registrationOptions(b: ConsoleBrowser) {
  await b.get('/console/account/security');
  const res = await b.post('/console/account/passkeys/options');
  expect([res.status, res.headers.get('content-type')]).toEqual([200, 'application/json; charset=utf-8']);
  return JSON.parse(res.text) as {
    challenge: string;
    rp: { id: string };
    user: { name: string };
    excludeCredentials: Array<{ id: string }>;
  };
}

/** A user with one passkey registered through the routes. */
async function withPasskey() {
  const user = await owner();
  const key = new SoftwareAuthenticator(stack.baseUrl);
  const b = await signedIn(user);
  const options = await registrationOptions(b);
  const added = await b.post('/console/account/passkeys', {
    name: 'Laptop',
    response: JSON.stringify(key.register(options.challenge)),
  });
  expect(added.status).toBe(201);
  return { user, key };
}

/** The password step, and the second step's page (its CSRF token). */
async function passwordStep(user: TestConsoleUser) {
  const b = browser();
  await b.get('/console/sign-in');
  expect((await b.post('/console/sign-in', { email: user.email, password: user.password })).status).toBe(303);
  return { b, page: await b.get('/console/sign-in/verify') };
}

async function authenticationOptions(b: ConsoleBrowser) {
  const res = await b.post('/console/sign-in/passkey/options');
  expect(res.status).toBe(200);
  return JSON.parse(res.text) as { challenge: string; rpId: string; allowCredentials: Array<{ id: string }> };
}

describe('Account › Security: registering and removing passkeys', () => {
  it('registers a passkey (stored with its key, counter and transports), lists it, and audits and counts it', async () => {
    const user = await owner();
    const key = new SoftwareAuthenticator(stack.baseUrl);
    const b = await signedIn(user);
    const page = await b.get('/console/account/security');
    expect(page.status).toBe(200);
    expect(page.text).toContain('No passkeys yet.');
    // The page's scripts are files of the console's origin (the CSP allows no inline script).
    expect(page.text).toMatch(/<script src="\/hosted\/static\/simplewebauthn-browser\.js\?v=[0-9a-f]{12}" defer>/);
    expect(page.text).toMatch(/<script src="\/hosted\/static\/console-passkeys\.js\?v=[0-9a-f]{12}" defer>/);
    expect(page.text).not.toMatch(/<script>/);
    const script = await fetch(`${stack.baseUrl}/hosted/static/simplewebauthn-browser.js`);
    expect([script.status, script.headers.get('content-type')]).toEqual([200, 'text/javascript; charset=utf-8']);
    expect(await script.text()).toContain('SimpleWebAuthnBrowser');

    const before = await counted('passkey_add', 'success');
    const options = await registrationOptions(b);
    expect([options.rp.id, options.user.name, options.excludeCredentials]).toEqual(['127.0.0.1', user.email, []]);
    // Only the challenge's hash is kept, for this session.
    const stored = await stack
      .db('console_webauthn_challenges as c')
      .join('console_sessions as s', 's.id', 'c.session_id')
      .where('s.user_id', user.id)
      .select('c.purpose', 'c.challenge_hash', 'c.expires_at');
    expect(stored).toHaveLength(1);
    expect(stored[0].purpose).toBe('register');
    expect(JSON.stringify(stored)).not.toContain(options.challenge);
    const ttl = new Date(stored[0].expires_at).getTime() - stack.clock().getTime();
    expect(ttl).toBeGreaterThan(5 * 60_000 - 5_000);
    expect(ttl).toBeLessThanOrEqual(5 * 60_000);

    const response = JSON.stringify(key.register(options.challenge));
    const added = await b.post('/console/account/passkeys', { name: 'Laptop', response });
    expect(added.status).toBe(201);
    expect(added.text).toContain('Passkey added.');
    expect(added.text).toContain('<td>Laptop</td>');
    const row = await stack.db('console_passkeys').where({ user_id: user.id }).first();
    expect([row.credential_id, row.counter, row.transports, row.name, row.last_used_at]).toEqual([
      key.id,
      0,
      ['internal'],
      'Laptop',
      null,
    ]);
    expect(Buffer.isBuffer(row.public_key) && row.public_key.length).toBeGreaterThan(60);
    expect(await counted('passkey_add', 'success')).toBe(before + 1);
    expect((await auditRows(stack.db, user.id)).filter((r) => r.action === 'passkey_add')).toEqual([
      { action: 'passkey_add', outcome: 'success', target: row.id, detail: null },
    ]);

    // The challenge worked once: the same answer again is refused, and nothing more is stored.
    const again = await b.post('/console/account/passkeys', { name: 'Laptop', response });
    expect(again.status).toBe(422);
    // The next options exclude the registered passkey.
    expect((await registrationOptions(b)).excludeCredentials.map((c) => c.id)).toEqual([key.id]);
    expect(await stack.db('console_passkeys').where({ user_id: user.id }).count('* as n')).toEqual([{ n: 1 }]);
  });

  it('refuses an answer to another challenge, another session’s challenge, another origin, or no answer', async () => {
    const user = await owner();
    const b = await signedIn(user);
    const other = await signedIn(user);
    const key = new SoftwareAuthenticator(stack.baseUrl);
    await registrationOptions(b);
    const otherOptions = await registrationOptions(other);
    await b.get('/console/account/security');
    const tries = [
      key.register(strayChallenge()),
      // The other session's live challenge is not this session's.
      key.register(otherOptions.challenge),
    ];
    for (const answer of tries) {
      const res = await b.post('/console/account/passkeys', { name: 'X', response: JSON.stringify(answer) });
      expect([res.status, res.text.includes('The passkey was not accepted.')]).toEqual([422, true]);
    }
    const wrongOrigin = key.register((await registrationOptions(b)).challenge, 'https://evil.example');
    await b.get('/console/account/security');
    expect(
      (await b.post('/console/account/passkeys', { name: 'X', response: JSON.stringify(wrongOrigin) })).status,
    ).toBe(422);
    expect((await b.post('/console/account/passkeys', { name: 'X', response: 'not json' })).status).toBe(422);
    expect((await b.post('/console/account/passkeys', { name: 'X' })).status).toBe(422);
    expect(await stack.db('console_passkeys').where({ user_id: user.id }).count('* as n')).toEqual([{ n: 0 }]);
    const reasons = (await auditRows(stack.db, user.id))
      .filter((r) => r.action === 'passkey_add')
      .map((r) => [r.outcome, r.detail.reason]);
    expect(reasons).toEqual([
      ['failed', 'no_challenge'],
      ['failed', 'no_challenge'],
      ['failed', 'not_verified'],
      ['failed', 'bad_response'],
      ['failed', 'bad_response'],
    ]);
  });

  it('refuses the options and the registration without a session (401), without CSRF (403), as a GET (405)', async () => {
    const anon = browser();
    await anon.get('/console/sign-in');
    expect((await anon.post('/console/account/passkeys/options')).status).toBe(401);
    expect((await anon.post('/console/account/passkeys', { response: '{}' })).status).toBe(401);
    expect((await anon.post('/console/sign-in/passkey/options')).status).toBe(401);
    expect((await anon.post('/console/sign-in/passkey', { response: '{}' })).status).toBe(401);

    const user = await owner();
    const b = await signedIn(user);
    await b.get('/console/account/security');
    expect((await b.post('/console/account/passkeys/options', {}, { csrf: null })).status).toBe(403);
    expect((await b.post('/console/account/passkeys/options', {}, { csrf: 'forged' })).status).toBe(403);
    expect((await b.post('/console/account/passkeys/options', {}, { origin: 'https://evil.example' })).status).toBe(
      403,
    );
    expect((await b.post('/console/account/passkeys/options', {}, { fetchSite: 'cross-site' })).status).toBe(403);
    expect((await b.post('/console/account/passkeys', { response: '{}' }, { csrf: null })).status).toBe(403);
    expect((await b.get('/console/account/passkeys/options')).status).toBe(405);
    // None of the refused asks left a challenge.
    const sessions = stack.db('console_sessions').where({ user_id: user.id }).select('id');
    expect(await stack.db('console_webauthn_challenges').whereIn('session_id', sessions)).toEqual([]);
  });

  it('is for every role, of a seller or a merchant; every action URL answers 405 to a GET', async () => {
    const { seller_id } = await buildSeller(stack.db);
    const merchant = await buildMerchant(stack.db);
    const users = [
      ...(await Promise.all(
        (['owner', 'developer', 'operator', 'viewer'] as const).map((role) =>
          consoleUser(stack, { sellerId: seller_id }, role),
        ),
      )),
      await consoleUser(stack, { merchantId: merchant.merchantId }, 'viewer'),
    ];
    for (const user of users) {
      const b = await signedIn(user);
      expect([user.role, (await b.get('/console/account/security')).status]).toEqual([user.role, 200]);
      const options = await b.post('/console/account/passkeys/options');
      expect([user.role, options.status]).toEqual([user.role, 200]);
      const key = new SoftwareAuthenticator(stack.baseUrl);
      await b.get('/console/account/security');
      const added = await b.post('/console/account/passkeys', {
        name: 'Phone',
        response: JSON.stringify(key.register(JSON.parse(options.text).challenge)),
      });
      expect([user.role, added.status]).toEqual([user.role, 201]);
    }
    const b = await signedIn(users[0]);
    const passkey = await stack.db('console_passkeys').where({ user_id: users[0].id }).first('id');
    for (const path of [
      '/console/account/passkeys/options',
      '/console/account/passkeys',
      `/console/account/passkeys/${passkey.id}/remove`,
      '/console/sign-in/passkey/options',
      '/console/sign-in/passkey',
    ]) {
      expect([path, (await b.get(path)).status]).toEqual([path, 405]);
    }
    expect(await stack.db('console_passkeys').where({ id: passkey.id }).first('id')).toEqual(passkey);
  });

  it('needs password and code within 5 minutes to register or remove a passkey', async () => {
    const { user, key } = await withPasskey();
    const b = await signedIn(user);
    stack.clock.advance(6 * 60_000);
    await b.get('/console/account/security');
    const reauth = [303, '/console/reauth?next=%2Fconsole%2Faccount%2Fsecurity'];
    const options = await b.post('/console/account/passkeys/options');
    expect([options.status, options.location]).toEqual(reauth);
    const add = await b.post('/console/account/passkeys', { response: JSON.stringify(key.register(strayChallenge())) });
    expect([add.status, add.location]).toEqual(reauth);
    const passkey = await stack.db('console_passkeys').where({ user_id: user.id }).first('id');
    const remove = await b.post(`/console/account/passkeys/${passkey.id}/remove`);
    expect([remove.status, remove.location]).toEqual(reauth);
    expect(await stack.db('console_passkeys').where({ id: passkey.id }).first('id')).toEqual(passkey);

    await b.get(reauth[1] as string);
    expect((await b.post(reauth[1] as string, { password: user.password, code: b.nextCode(user) })).status).toBe(303);
    await b.get('/console/account/security');
    expect((await b.post('/console/account/passkeys/options')).status).toBe(200);
  });

  it('removes one’s own passkey (re-authenticated), never another user’s', async () => {
    const { user } = await withPasskey();
    const other = await withPasskey();
    const theirs = await stack.db('console_passkeys').where({ user_id: other.user.id }).first('id');
    const mine = await stack.db('console_passkeys').where({ user_id: user.id }).first('id');
    const b = await signedIn(user);
    await b.get('/console/account/security');
    expect((await b.post(`/console/account/passkeys/${theirs.id}/remove`)).status).toBe(403);
    expect(await stack.db('console_passkeys').where({ id: theirs.id }).first('id')).toEqual(theirs);
    const removed = await b.post(`/console/account/passkeys/${mine.id}/remove`);
    expect([removed.status, removed.text.includes('Passkey removed.')]).toEqual([200, true]);
    expect(await stack.db('console_passkeys').where({ user_id: user.id })).toEqual([]);
    expect(
      (await auditRows(stack.db, user.id))
        .filter((r) => r.action === 'passkey_remove')
        .map((r) => [r.outcome, r.target]),
    ).toEqual([
      ['denied', theirs.id],
      ['success', mine.id],
    ]);
  });
});

describe('a passkey as the second factor', () => {
  it('completes the sign-in as a code does: a new session token, an audit entry with factor passkey, the counter kept', async () => {
    const { user, key } = await withPasskey();
    const { b, page } = await passwordStep(user);
    expect(page.text).toContain('Use a passkey');
    expect(page.text).toContain('name="code"');
    const options = await authenticationOptions(b);
    expect([options.rpId, options.allowCredentials.map((c) => c.id)]).toEqual(['127.0.0.1', [key.id]]);
    const pending = b.cookies.get('__Host-console_session');
    const before = await counted('sign_in', 'success');
    const ok = await b.post('/console/sign-in/passkey', {
      response: JSON.stringify(key.assert(options.challenge)),
    });
    expect([ok.status, ok.location]).toEqual([303, '/console']);
    expect(b.cookies.get('__Host-console_session')).not.toBe(pending);
    expect((await b.get('/console/account/security')).status).toBe(200);
    expect(await counted('sign_in', 'success')).toBe(before + 1);
    const row = await stack.db('console_passkeys').where({ user_id: user.id }).first();
    expect(row.counter).toBe(1);
    expect(stack.clock().getTime() - row.last_used_at.getTime()).toBeLessThan(5_000);
    const signIns = (await auditRows(stack.db, user.id)).filter((r) => r.action === 'sign_in');
    expect(signIns.at(-1)).toEqual({
      action: 'sign_in',
      outcome: 'success',
      target: expect.stringMatching(/^csess_/),
      detail: { factor: 'passkey', passkey_id: row.id },
    });
    // A user without a passkey is offered none.
    const plain = await passwordStep(await owner());
    expect(plain.page.text).not.toContain('Use a passkey');
    expect((await plain.b.post('/console/sign-in/passkey/options')).status).toBe(404);
  });

  it('refuses another challenge, a used one, an old counter, another user’s passkey, and CSRF-less posts', async () => {
    const { user, key } = await withPasskey();
    const stranger = await withPasskey();
    const { b } = await passwordStep(user);
    expect((await b.post('/console/sign-in/passkey/options', {}, { csrf: null })).status).toBe(403);
    const options = await authenticationOptions(b);
    const refused = async (answer: unknown, opts = {}) => {
      const res = await b.post('/console/sign-in/passkey', { response: JSON.stringify(answer) }, opts);
      return res.status;
    };
    expect(await refused(key.assert(options.challenge), { csrf: null })).toBe(403);
    expect(await refused(key.assert(strayChallenge()))).toBe(401);
    expect(await refused(stranger.key.assert((await authenticationOptions(b)).challenge))).toBe(401);
    // Counter: a first use stores the authenticator's count; a count that goes back is a cloned key's.
    const used = (await authenticationOptions(b)).challenge;
    const answer = key.assert(used);
    expect(await refused(answer)).toBe(303);
    const second = await passwordStep(user);
    const replay = await authenticationOptions(second.b);
    key.counter = 0;
    expect(
      (await second.b.post('/console/sign-in/passkey', { response: JSON.stringify(key.assert(replay.challenge)) }))
        .status,
    ).toBe(401);
    // An answer to a challenge already taken is refused.
    await authenticationOptions(second.b);
    expect((await second.b.post('/console/sign-in/passkey', { response: JSON.stringify(answer) })).status).toBe(401);
    expect(
      (await auditRows(stack.db, user.id))
        .filter((r) => r.action === 'second_factor')
        .map((r) => [r.outcome, r.detail?.factor, r.detail?.reason]),
    ).toEqual([
      ['failed', 'passkey', 'no_challenge'],
      ['failed', 'passkey', 'unknown_passkey'],
      ['failed', 'passkey', 'counter'],
      ['failed', 'passkey', 'no_challenge'],
    ]);
  });

  it('counts passkey tries with the codes: past 10 in 15 minutes, 429 and the session ends', async () => {
    const { user, key } = await withPasskey();
    const { b } = await passwordStep(user);
    for (let i = 0; i < 10; i++) {
      const res = await b.post('/console/sign-in/passkey', { response: JSON.stringify(key.assert(strayChallenge())) });
      expect(res.status).toBe(401);
    }
    const throttled = await b.post('/console/sign-in/passkey', {
      response: JSON.stringify(key.assert((await authenticationOptions(b)).challenge)),
    });
    expect([throttled.status, Number(throttled.headers.get('retry-after')) > 0]).toEqual([429, true]);
    expect((await b.get('/console/sign-in/verify')).status).toBe(401);
  });
});

describe('a passkey for re-authentication', () => {
  const SECURITY = '/console/account/security';
  const REAUTH = `/console/reauth?next=${encodeURIComponent(SECURITY)}`;
  const PASSKEY_REAUTH = `/console/reauth/passkey?next=${encodeURIComponent(SECURITY)}`;

  /** Signed in with a passkey registered, the re-authentication 6 minutes old, and the reauth page read. */
  async function stale() {
    const { user, key } = await withPasskey();
    const b = await signedIn(user);
    stack.clock.advance(6 * 60_000);
    await b.get(SECURITY);
    const refused = await b.post('/console/account/passkeys/options');
    expect([refused.status, refused.location]).toEqual([303, REAUTH]);
    const page = await b.get(REAUTH);
    return { user, key, b, page };
  }

  async function reauthOptions(b: ConsoleBrowser) {
    const res = await b.post('/console/reauth/passkey/options');
    expect([res.status, res.headers.get('content-type')]).toEqual([200, 'application/json; charset=utf-8']);
    return JSON.parse(res.text) as {
      challenge: string;
      userVerification: string;
      allowCredentials: Array<{ id: string }>;
    };
  }

  const sessionOf = (b: ConsoleBrowser, userId: string) =>
    stack
      .db('console_sessions')
      .where({ user_id: userId })
      .whereNull('revoked_at')
      .whereNotNull('second_factor_at')
      .orderBy('created_at', 'desc')
      .first('id', 'reauthenticated_at');

  it('re-authenticates with the passkey alone (user verified): a fresh challenge of this session for reauth, used once; audited with factor passkey', async () => {
    const { user, key, b, page } = await stale();
    // Offered beside password and code, with its scripts (files of ours: the CSP allows no inline script).
    expect(page.text).toContain('Confirm with a passkey on this device');
    expect(page.text).toContain(`action="${PASSKEY_REAUTH.replace(/&/g, '&amp;')}"`);
    expect(page.text).toMatch(/<script src="\/hosted\/static\/console-passkeys\.js\?v=[0-9a-f]{12}" defer>/);
    expect(page.text).toContain('name="password"');
    const before = (await sessionOf(b, user.id)).reauthenticated_at as Date;
    const counted0 = await counted('reauthenticate', 'success');

    const options = await reauthOptions(b);
    // User verification is required: the passkey stands for both factors here.
    expect([options.userVerification, options.allowCredentials.map((c) => c.id)]).toEqual(['required', [key.id]]);
    const stored = await stack
      .db('console_webauthn_challenges')
      .where({ session_id: (await sessionOf(b, user.id)).id })
      .select('purpose');
    expect(stored).toEqual([{ purpose: 'reauth' }]);

    const answer = JSON.stringify(key.assert(options.challenge));
    const ok = await b.post(PASSKEY_REAUTH, { response: answer });
    expect([ok.status, ok.location]).toEqual([303, SECURITY]);
    const after = (await sessionOf(b, user.id)).reauthenticated_at as Date;
    expect(after.getTime()).toBeGreaterThan(before.getTime());
    expect(Math.abs(after.getTime() - stack.clock().getTime())).toBeLessThan(5_000);
    // The challenge is gone; the sensitive action passes now.
    expect(
      await stack.db('console_webauthn_challenges').where({ session_id: (await sessionOf(b, user.id)).id }),
    ).toEqual([]);
    await b.get(SECURITY);
    expect((await b.post('/console/account/passkeys/options')).status).toBe(200);
    const row = await stack.db('console_passkeys').where({ user_id: user.id }).first('id', 'counter', 'last_used_at');
    expect(row.counter).toBe(1);
    expect(Math.abs(row.last_used_at.getTime() - stack.clock().getTime())).toBeLessThan(5_000);
    expect(await counted('reauthenticate', 'success')).toBe(counted0 + 1);
    expect((await auditRows(stack.db, user.id)).filter((r) => r.action === 'reauthenticate').at(-1)).toEqual({
      action: 'reauthenticate',
      outcome: 'success',
      target: null,
      detail: { factor: 'passkey', passkey_id: row.id },
    });

    // The same answer again is refused: its challenge was used.
    await b.get(REAUTH);
    expect((await b.post(PASSKEY_REAUTH, { response: answer })).status).toBe(401);
  });

  it('refuses another purpose’s or session’s challenge, an unverified user, an old counter, another user’s passkey; each audited with its reason', async () => {
    const { user, key, b } = await stale();
    const stranger = await withPasskey();
    const other = await signedIn(user);
    await other.get(REAUTH);
    const otherOptions = await reauthOptions(other);
    const refusedWith = async (answer: unknown) => {
      await b.get(REAUTH);
      const res = await b.post(PASSKEY_REAUTH, { response: JSON.stringify(answer) });
      expect(res.text).toContain('The passkey was not accepted.');
      return res.status;
    };
    // Another session's reauth challenge, and a challenge no one handed out.
    expect(await refusedWith(key.assert(otherOptions.challenge))).toBe(401);
    expect(await refusedWith(key.assert(strayChallenge()))).toBe(401);
    // Without user verification (a security key with no PIN): refused for re-authentication.
    key.userVerified = false;
    await b.get(REAUTH);
    expect(await refusedWith(key.assert((await reauthOptions(b)).challenge))).toBe(401);
    key.userVerified = true;
    // Another user's passkey.
    await b.get(REAUTH);
    expect(await refusedWith(stranger.key.assert((await reauthOptions(b)).challenge))).toBe(401);
    // The passkey itself works (the stored counter becomes 1)…
    await b.get(REAUTH);
    expect(
      (await b.post(PASSKEY_REAUTH, { response: JSON.stringify(key.assert((await reauthOptions(b)).challenge)) }))
        .status,
    ).toBe(303);
    // …but a registration challenge of this very session is not a reauth one…
    await b.get(SECURITY);
    const register = JSON.parse((await b.post('/console/account/passkeys/options')).text) as { challenge: string };
    expect(await refusedWith(key.assert(register.challenge))).toBe(401);
    // …and a counter that goes back (a cloned key) is refused.
    key.counter = 0;
    await b.get(REAUTH);
    expect(await refusedWith(key.assert((await reauthOptions(b)).challenge))).toBe(401);
    // Without the page's token: refused before anything is read.
    await b.get(REAUTH);
    expect((await b.post('/console/reauth/passkey/options', {}, { csrf: null })).status).toBe(403);
    expect((await b.post(PASSKEY_REAUTH, { response: '{}' }, { csrf: null })).status).toBe(403);
    expect((await b.post(PASSKEY_REAUTH, { response: 'not json' })).status).toBe(401);

    expect(
      (await auditRows(stack.db, user.id))
        .filter((r) => r.action === 'reauthenticate')
        .map((r) => [r.outcome, r.detail?.factor, r.detail?.reason]),
    ).toEqual([
      ['failed', 'passkey', 'no_challenge'],
      ['failed', 'passkey', 'no_challenge'],
      ['failed', 'passkey', 'user_not_verified'],
      ['failed', 'passkey', 'unknown_passkey'],
      ['success', 'passkey', undefined],
      ['failed', 'passkey', 'no_challenge'],
      ['failed', 'passkey', 'counter'],
      ['failed', 'passkey', 'bad_response'],
    ]);
  });

  it('is for every signed-in role, never without a session (401) or as a GET (405); a user without a passkey is offered none (404)', async () => {
    const merchant = await buildMerchant(stack.db);
    const viewer = await consoleUser(stack, { merchantId: merchant.merchantId }, 'viewer');
    const key = new SoftwareAuthenticator(stack.baseUrl);
    const b = await signedIn(viewer);
    const added = await b.post('/console/account/passkeys', {
      name: 'Phone',
      response: JSON.stringify(key.register((await registrationOptions(b)).challenge)),
    });
    expect(added.status).toBe(201);
    await b.get('/console/reauth');
    const ok = await b.post('/console/reauth/passkey', {
      response: JSON.stringify(key.assert((await reauthOptions(b)).challenge)),
    });
    // No `next`: back to the console.
    expect([ok.status, ok.location]).toEqual([303, '/console']);
    for (const path of ['/console/reauth/passkey/options', '/console/reauth/passkey'])
      expect([path, (await b.get(path)).status]).toEqual([path, 405]);

    const anon = browser();
    await anon.get('/console/sign-in');
    expect((await anon.post('/console/reauth/passkey/options')).status).toBe(401);
    expect((await anon.post('/console/reauth/passkey', { response: '{}' })).status).toBe(401);
    // The password step alone is not signed in.
    const { b: halfway } = await passwordStep(viewer);
    expect((await halfway.post('/console/reauth/passkey/options')).status).toBe(401);

    const plain = await signedIn(await owner());
    const page = await plain.get('/console/reauth');
    expect(page.text).not.toContain('Confirm with a passkey');
    expect(page.text).not.toContain('console-passkeys.js');
    expect((await plain.post('/console/reauth/passkey/options')).status).toBe(404);
  });

  it('counts passkey tries with the password-and-code tries: past 10 in 15 minutes, 429 with Retry-After', async () => {
    const { key, b } = await stale();
    // The sign-in's code was one try of this session's window (unless the 6 minutes crossed into a new one).
    let refusals = 0;
    for (;;) {
      await b.get(REAUTH);
      const res = await b.post(PASSKEY_REAUTH, { response: JSON.stringify(key.assert(strayChallenge())) });
      if (res.status !== 401) {
        expect(res.status).toBe(429);
        break;
      }
      refusals += 1;
      expect(refusals).toBeLessThanOrEqual(10);
    }
    expect(refusals).toBeGreaterThanOrEqual(9);
    await b.get(REAUTH);
    const options = await reauthOptions(b);
    const throttled = await b.post(PASSKEY_REAUTH, { response: JSON.stringify(key.assert(options.challenge)) });
    expect([throttled.status, Number(throttled.headers.get('retry-after')) > 0]).toEqual([429, true]);
    // Not re-authenticated: the action still goes to the reauth page.
    await b.get(SECURITY);
    expect((await b.post('/console/account/passkeys/options')).status).toBe(303);
  });
});
