import { randomString } from '../../src/lib/ids';
import { auditRows, ConsoleBrowser, consoleUser, TestConsoleUser } from '../helpers/console';
import { createSession, paidSession as paid, payableBody, until } from '../helpers/checkout-payments';
import { buildMerchant, buildSeller } from '../helpers/factories';
import { call } from '../helpers/http';
import { startStack, Stack } from '../helpers/stack';

/**
 * The console's merchant Payments pages (docs/console.md) over real HTTP on the real app, Postgres
 * and Temporal worker: sessions with filters and mode scoping, a session with its attempts,
 * refunds and timeline, and refunds through `POST /v1/refunds`' service (its rules, its
 * idempotency), with the refund action against every role and tenant.
 */
let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack.stop());

const PAYMENTS = '/console/payments';
type Merchant = Awaited<ReturnType<typeof buildMerchant>>;

async function signedIn(user: TestConsoleUser) {
  const b = new ConsoleBrowser(stack);
  await b.signIn(user);
  return b;
}
const requestKeyOf = (text: string) => /name="request_key" value="([^"]+)"/.exec(text)?.[1] ?? '';
const leftOf = (text: string) => /id="left-to-refund">([^<]+)</.exec(text)?.[1];
const sessionRead = async (m: Merchant, id: string) =>
  (await call(stack.baseUrl, 'GET', `/v1/checkout/sessions/${id}`, { key: m.secretKey })).body;
const refundsOf = (sessionId: string) =>
  stack.db('refunds').where({ session_id: sessionId }).orderBy('created_at').select('id', 'amount', 'status', 'reason');

/** A row as knex returns it, its json columns as text again (to insert a copy). */
const json = (row: Record<string, unknown>) =>
  Object.fromEntries(
    Object.entries(row).map(([k, v]) => [
      k,
      v !== null && typeof v === 'object' && !(v instanceof Date) ? JSON.stringify(v) : v,
    ]),
  );

/** A session paid on the test gateway, on this file's stack. */
const paidSession = (m: Merchant, over: Record<string, unknown> = {}) => paid(stack, m, over);

describe('Payments › Sessions', () => {
  it('lists this mode’s sessions newest first, by status, reference id, created day and id; never another merchant’s or the other mode’s', async () => {
    const m = await buildMerchant(stack.db);
    const other = await buildMerchant(stack.db);
    const paid = await paidSession(m);
    const open = await createSession(stack, m.secretKey, payableBody({ reference_id: `ref-${randomString(8)}` }));
    const theirs = await createSession(stack, other.secretKey, payableBody());
    const b = await signedIn(await consoleUser(stack, { merchantId: m.merchantId }, 'viewer'));

    const all = await b.get(PAYMENTS);
    expect(all.status).toBe(200);
    expect(all.text).toContain('id="test-mode-banner"');
    expect(all.text).toContain('href="/console/payments" aria-current="page"');
    expect(all.text.indexOf(`session-${open.id}`)).toBeGreaterThan(-1);
    expect(all.text.indexOf(`session-${open.id}`)).toBeLessThan(all.text.indexOf(`session-${paid.id}`));
    expect(all.text).not.toContain(theirs.id);

    const shows = async (query: string) => {
      const res = await b.get(`${PAYMENTS}?${query}`);
      expect([query, res.status]).toEqual([query, 200]);
      return [paid.id, open.id].filter((id) => res.text.includes(`session-${id}`));
    };
    expect(await shows('status=completed')).toEqual([paid.id]);
    expect(await shows('status=open')).toEqual([open.id]);
    expect(await shows(`reference_id=${open.reference_id}`)).toEqual([open.id]);
    const day = (offsetDays: number) =>
      new Date(stack.clock().getTime() + offsetDays * 86_400_000).toISOString().slice(0, 10);
    expect(await shows(`from=${day(0)}&to=${day(0)}`)).toEqual([paid.id, open.id]);
    expect(await shows(`from=${day(1)}`)).toEqual([]);
    expect(await shows(`to=${day(-1)}`)).toEqual([]);
    expect(await shows(`q=${paid.id}`)).toEqual([paid.id]);
    expect((await b.get(`${PAYMENTS}?q=${theirs.id}`)).text).not.toContain(`session-${theirs.id}`);
    expect((await b.get(`${PAYMENTS}?from=27-11-2026`)).status).toBe(422);
    expect((await b.get(`${PAYMENTS}?cursor=not-a-cursor`)).status).toBe(422);
    // Another merchant's session has no page here.
    expect((await b.get(`${PAYMENTS}/${theirs.id}`)).status).toBe(404);

    // Live mode: none of the test sessions, by list, id or page.
    await b.post('/console/mode', { mode: 'live', next: PAYMENTS });
    const live = await b.get(PAYMENTS);
    expect(live.text).not.toContain('id="test-mode-banner"');
    expect(live.text).not.toContain(paid.id);
    expect(live.text).not.toContain(open.id);
    expect((await b.get(`${PAYMENTS}?q=${paid.id}`)).text).not.toContain(`session-${paid.id}`);
    expect((await b.get(`${PAYMENTS}/${paid.id}`)).status).toBe(404);

    // In Arabic, right to left; in Kurdish too.
    const ar = await b.get(`${PAYMENTS}?lang=ar`);
    expect(ar.text).toMatch(/<html lang="ar" dir="rtl">/);
    expect(ar.text).toContain('المدفوعات › الجلسات');
    const ku = await b.get(`${PAYMENTS}?lang=ku`);
    expect(ku.text).toMatch(/dir="rtl"/);
    expect(ku.text).toContain('پارەدانەکان › دانیشتنەکانی پارەدان');
  });

  it('pages by cursor, 50 a page, keeping the filters', async () => {
    const m = await buildMerchant(stack.db);
    const reference = `bulk-${randomString(8)}`;
    const base = await createSession(stack, m.secretKey, payableBody({ reference_id: reference }));
    const row = await stack.db('checkout_sessions').where({ id: base.id }).first();
    // 51 sessions like it, a second apart (copies of the row: the list reads only the table).
    await stack.db('checkout_sessions').insert(
      Array.from({ length: 51 }, (_, i) => ({
        ...json(row),
        // One open session per reference id: the copies have expired.
        status: 'expired',
        id: `${base.id.slice(0, -6)}${String(i).padStart(6, '0')}`,
        code: `${row.code}${i}`.slice(-row.code.length),
        created_at: new Date(row.created_at.getTime() - (i + 1) * 1000),
      })),
    );
    const b = await signedIn(await consoleUser(stack, { merchantId: m.merchantId }, 'viewer'));
    const first = await b.get(`${PAYMENTS}?reference_id=${reference}`);
    expect(first.text.match(/id="session-/g)).toHaveLength(50);
    const next = /href="(\/console\/payments\?[^"]+)">Older sessions</.exec(first.text)![1].replace(/&amp;/g, '&');
    expect(next).toContain(`reference_id=${reference}`);
    const second = await b.get(next);
    expect(second.text.match(/id="session-/g)).toHaveLength(2);
    expect(second.text).not.toContain('Older sessions');
  });
});

describe('a session and its refunds', () => {
  it('shows the amount, attempts, refunds and what is left; refunds part, then the rest; the timeline ends with the refunds', async () => {
    const m = await buildMerchant(stack.db);
    const s = await paidSession(m);
    const user = await consoleUser(stack, { merchantId: m.merchantId }, 'operator');
    const b = await signedIn(user);
    const page = await b.get(`${PAYMENTS}/${s.id}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain('id="session-amount">10000 IQD<');
    expect(page.text).toContain('id="session-status">completed<');
    expect(page.text).toContain('id="session-payment-status">paid<');
    expect(page.text).toMatch(
      new RegExp(
        `id="attempt-${s.attemptId}">\\s*<td class="mono">${s.attemptId}</td>\\s*<td>test</td>\\s*<td>succeeded</td>`,
      ),
    );
    expect(leftOf(page.text)).toBe('10000 IQD');
    expect(page.text).toContain('No refunds.');
    expect(page.text).toContain('name="amount" min="1" max="10000" step="1" value="10000"');

    const part = await b.post(`${PAYMENTS}/${s.id}/refunds`, {
      amount: '4000',
      reason: 'damaged <box>',
      request_key: requestKeyOf(page.text),
    });
    expect(part.status).toBe(201);
    expect(part.text).toMatch(/Refund re_test_[A-Za-z0-9]+ of 4000 IQD requested/);
    expect(part.text).toContain('damaged &lt;box&gt;');
    expect(leftOf(part.text)).toBe('6000 IQD');
    const rest = await b.post(`${PAYMENTS}/${s.id}/refunds`, { amount: '6000', request_key: requestKeyOf(part.text) });
    expect(rest.status).toBe(201);
    expect(leftOf(rest.text)).toBe('0 IQD');
    // Nothing is left: no refund form.
    expect(rest.text).not.toContain(`action="${PAYMENTS}/${s.id}/refunds"`);
    const refunds = await refundsOf(s.id);
    expect(refunds.map((r) => [r.amount, r.reason])).toEqual([
      [4000, 'damaged <box>'],
      [6000, 'requested_by_customer'],
    ]);

    await until(async () => (await refundsOf(s.id)).every((r) => r.status === 'succeeded'), 'both refunds settled');
    await until(async () => (await sessionRead(m, s.id)).payment_status === 'refunded', 'the session fully refunded');
    let settled = await b.get(`${PAYMENTS}/${s.id}`);
    await until(async () => {
      settled = await b.get(`${PAYMENTS}/${s.id}`);
      return (settled.text.match(/refund\.succeeded/g) ?? []).length === 2;
    }, 'both refund events on the timeline');
    expect(settled.text).toContain('id="session-payment-status">refunded<');
    for (const r of refunds)
      expect(settled.text).toMatch(new RegExp(`id="refund-${r.id}">[\\s\\S]*?<td>succeeded</td>`));
    const timeline = /<ol class="events" id="timeline">([\s\S]*?)<\/ol>/.exec(settled.text)![1];
    const types = [...timeline.matchAll(/<strong class="mono">([a-z._]+)<\/strong>/g)].map((x) => x[1]);
    expect(types).toContain('checkout.session.completed');
    expect(types.indexOf('checkout.session.completed')).toBeLessThan(types.indexOf('refund.succeeded'));
    expect(types.slice(-2)).toEqual(['refund.succeeded', 'refund.succeeded']);

    const audit = await auditRows(stack.db, user.id);
    const created = audit.filter((r) => r.action === 'refund_create');
    expect(created.map((r) => [r.outcome, r.target, r.detail.amount, r.detail.mode])).toEqual([
      ['success', s.id, 4000, 'test'],
      ['success', s.id, 6000, 'test'],
    ]);
    expect(created.map((r) => r.detail.refund_id)).toEqual(refunds.map((r) => r.id));
    expect(JSON.stringify(audit)).not.toContain(m.secretKey);
  });

  it('an over-refund is refused with the API’s message and status, as is a session with nothing captured', async () => {
    const m = await buildMerchant(stack.db);
    const s = await paidSession(m);
    const open = await createSession(stack, m.secretKey, payableBody());
    const b = await signedIn(await consoleUser(stack, { merchantId: m.merchantId }, 'owner'));
    await b.get(`${PAYMENTS}/${s.id}`);
    const over = await b.post(`${PAYMENTS}/${s.id}/refunds`, { amount: '10001' });
    const api = await call(stack.baseUrl, 'POST', '/v1/refunds', {
      key: m.secretKey,
      body: { session_id: s.id, amount: 10001 },
      idempotencyKey: `idem_${randomString(16)}`,
    });
    expect([api.status, over.status]).toEqual([409, 409]);
    expect(over.text).toContain(api.body.error.message);
    expect(over.text).toContain('The refund exceeds what remains captured: 10000 IQD remains refundable.');
    expect(await refundsOf(s.id)).toEqual([]);

    const notCaptured = await b.post(`${PAYMENTS}/${open.id}/refunds`, { amount: '100' });
    expect(notCaptured.status).toBe(409);
    expect(notCaptured.text).toContain('Nothing is captured on this session, so there is nothing to refund.');
    // Not an amount: refused before the service, nothing done.
    for (const amount of ['0', '-5', '12.5', 'all', ''])
      expect([amount, (await b.post(`${PAYMENTS}/${s.id}/refunds`, { amount })).status]).toEqual([amount, 422]);
    expect(await refundsOf(s.id)).toEqual([]);
  });

  it('the same form posted twice refunds once; its key with another amount is refused', async () => {
    const m = await buildMerchant(stack.db);
    const s = await paidSession(m);
    const user = await consoleUser(stack, { merchantId: m.merchantId }, 'owner');
    const b = await signedIn(user);
    const key = requestKeyOf((await b.get(`${PAYMENTS}/${s.id}`)).text);
    expect(key).toMatch(/^console_/);
    const [one, two] = await Promise.all([
      b.post(`${PAYMENTS}/${s.id}/refunds`, { amount: '2500', request_key: key }),
      b.post(`${PAYMENTS}/${s.id}/refunds`, { amount: '2500', request_key: key }),
    ]);
    expect([one.status, two.status].sort()).toEqual([200, 201]);
    expect((one.status === 200 ? one : two).text).toContain('was already requested with this form');
    const again = await b.post(`${PAYMENTS}/${s.id}/refunds`, { amount: '2500', request_key: key });
    expect(again.status).toBe(200);
    expect(leftOf(again.text)).toBe('7500 IQD');
    const changed = await b.post(`${PAYMENTS}/${s.id}/refunds`, { amount: '3000', request_key: key });
    expect(changed.status).toBe(409);
    expect(changed.text).toContain('This Idempotency-Key was used with another body or route.');
    expect((await refundsOf(s.id)).map((r) => r.amount)).toEqual([2500]);
    const audited = (await auditRows(stack.db, user.id)).filter((r) => r.action === 'refund_create');
    expect(audited.map((r) => [r.outcome, r.detail.code])).toEqual([
      ['success', undefined],
      ['failed', 'idempotency_key_conflict'],
    ]);
  });

  it('one form posted twice at once with different amounts refunds once: the other is refused (409) inside the service’s transaction', async () => {
    const m = await buildMerchant(stack.db);
    const s = await paidSession(m);
    const b = await signedIn(await consoleUser(stack, { merchantId: m.merchantId }, 'operator'));
    const made: number[] = [];
    for (const [a, c] of [
      ['1000', '1500'],
      ['2000', '500'],
      ['700', '900'],
    ]) {
      const key = requestKeyOf((await b.get(`${PAYMENTS}/${s.id}`)).text);
      const answers = await Promise.all([
        b.post(`${PAYMENTS}/${s.id}/refunds`, { amount: a, request_key: key }),
        b.post(`${PAYMENTS}/${s.id}/refunds`, { amount: c, request_key: key }),
      ]);
      expect(answers.map((r) => r.status).sort()).toEqual([201, 409]);
      const refused = answers.find((r) => r.status === 409)!;
      expect(refused.text).toContain('This Idempotency-Key was used with another body or route.');
      made.push(Number(answers[0].status === 201 ? a : c));
      const rows = await stack.db('refunds').where({ idempotency_key: key }).select('amount');
      expect(rows.map((r) => r.amount)).toEqual([made.at(-1)]);
    }
    expect((await refundsOf(s.id)).map((r) => r.amount)).toEqual(made);
  });

  it('refunding needs password and code within 5 minutes; re-authentication returns to the session', async () => {
    const m = await buildMerchant(stack.db);
    const s = await paidSession(m);
    const user = await consoleUser(stack, { merchantId: m.merchantId }, 'owner');
    const b = await signedIn(user);
    stack.clock.advance(6 * 60_000);
    await b.get(`${PAYMENTS}/${s.id}`);
    const stale = await b.post(`${PAYMENTS}/${s.id}/refunds`, { amount: '100' });
    const back = `${PAYMENTS}/${s.id}`;
    expect([stale.status, stale.location]).toEqual([303, `/console/reauth?next=${encodeURIComponent(back)}`]);
    expect(await refundsOf(s.id)).toEqual([]);
    await b.get(stale.location!);
    const reauth = await b.post(stale.location!, { password: user.password, code: b.nextCode(user) });
    expect([reauth.status, reauth.location]).toEqual([303, back]);
    await b.get(back);
    expect((await b.post(`${PAYMENTS}/${s.id}/refunds`, { amount: '100' })).status).toBe(201);
    expect((await refundsOf(s.id)).map((r) => r.amount)).toEqual([100]);
  });
});

describe('refund route × role matrix', () => {
  const ROLES = ['owner', 'developer', 'operator', 'viewer'] as const;
  const ALLOWED = ['owner', 'operator'];
  const snapshot = async (sessionId: string) => ({
    refunds: await refundsOf(sessionId),
    session: await stack.db('checkout_sessions').where({ id: sessionId }).first('status', 'refunded_amount', 'payment'),
  });

  it('owner and operator only, their own merchant’s sessions only, never without a session or CSRF token, never on GET', async () => {
    const mine = await buildMerchant(stack.db);
    const theirs = await buildMerchant(stack.db);
    const s = await paidSession(mine);
    const t = await paidSession(theirs);
    const path = (id: string) => `${PAYMENTS}/${id}/refunds`;
    const outcomes: Record<string, number> = {};
    for (const role of ROLES) {
      const b = await signedIn(await consoleUser(stack, { merchantId: mine.merchantId }, role));
      // Every role reads the pages.
      expect([role, (await b.get(PAYMENTS)).status, (await b.get(`${PAYMENTS}/${s.id}`)).status]).toEqual([
        role,
        200,
        200,
      ]);
      const before = await snapshot(s.id);
      expect([role, (await b.post(path(s.id), { amount: '100' }, { csrf: null })).status]).toEqual([role, 403]);
      expect([role, (await b.post(path(s.id), { amount: '100' }, { origin: 'https://evil.example' })).status]).toEqual([
        role,
        403,
      ]);
      expect(await snapshot(s.id)).toEqual(before);
      const res = await b.post(path(s.id), { amount: '100' });
      outcomes[role] = res.status;
      if (!ALLOWED.includes(role)) expect(await snapshot(s.id)).toEqual(before);
      // The form is offered only to those who may use it.
      expect([role, res.text.includes(`action="${path(s.id)}"`)]).toEqual([role, ALLOWED.includes(role)]);
      if (ALLOWED.includes(role)) {
        const beforeTheirs = await snapshot(t.id);
        expect([role, 'other merchant', (await b.post(path(t.id), { amount: '100' })).status]).toEqual([
          role,
          'other merchant',
          403,
        ]);
        expect([role, 'no such session', (await b.post(path('cs_test_nope'), { amount: '100' })).status]).toEqual([
          role,
          'no such session',
          403,
        ]);
        expect(await snapshot(t.id)).toEqual(beforeTheirs);
      }
    }
    expect(outcomes).toEqual({ owner: 201, developer: 403, operator: 201, viewer: 403 });
    expect((await refundsOf(s.id)).map((r) => r.amount)).toEqual([100, 100]);

    const denied = await stack
      .db('console_audit_log')
      .where({ merchant_id: mine.merchantId, action: 'refund_create', outcome: 'denied' })
      .pluck('target');
    expect(denied).toEqual(expect.arrayContaining([t.id, 'cs_test_nope']));

    // A seller's owner has no merchant pages at all.
    const seller = await buildSeller(stack.db);
    const sb = await signedIn(await consoleUser(stack, { sellerId: seller.seller_id }, 'owner'));
    await sb.get('/console/orders');
    const beforeTheirs = await snapshot(t.id);
    expect((await sb.post(path(t.id), { amount: '100' })).status).toBe(403);
    expect((await sb.get(PAYMENTS)).status).toBe(403);
    expect((await sb.get(`${PAYMENTS}/${t.id}`)).status).toBe(403);
    expect(await snapshot(t.id)).toEqual(beforeTheirs);
    // Signed out: 401 (pages go to sign-in), nothing done.
    const anon = new ConsoleBrowser(stack);
    await anon.get('/console/sign-in');
    expect((await anon.post(path(t.id), { amount: '100' })).status).toBe(401);
    expect((await anon.get(PAYMENTS)).status).toBe(303);
    // No state change on GET.
    expect((await anon.get(path(t.id))).status).toBe(405);
    expect(await snapshot(t.id)).toEqual(beforeTheirs);
  });
});
