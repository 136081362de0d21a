import { otpRules } from '../../src/checkout/public-limits';
import { registry } from '../../src/telemetry/metrics';
import { randomString } from '../../src/lib/ids';
import { payableBody, randomPhone, sessionBody, shopper } from '../helpers/checkout-payments';
import { buildMerchant, buildSeller } from '../helpers/factories';
import { call } from '../helpers/http';
import { partnerClient, uniqueSku } from '../helpers/partner';
import { startStack, Stack } from '../helpers/stack';

/**
 * Each counter counts its event once, with the labels the README lists, read from the process's
 * registry (what `/metrics` serves). The stack's app and worker run in this process, so the
 * deltas below are this file's own.
 */
let stack: Stack;
beforeAll(async () => {
  // A small bulk limit, so the rate-limit counter is reached in a few requests.
  stack = await startStack({ PARTNER_BULK_RATE_LIMIT: '2' });
});
afterAll(() => stack.stop());

/** The sum of `name`'s series whose labels include `labels`. */
async function value(name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = registry.getSingleMetric(name);
  if (!metric) throw new Error(`no metric ${name}`);
  const { values } = await metric.get();
  return (
    values
      .filter((v) => Object.entries(labels).every(([k, l]) => (v.labels as Record<string, unknown>)[k] === l))
      // A histogram's series: only its _count (one per request), not its buckets and sum.
      .filter((v) => {
        const series = (v as { metricName?: string }).metricName;
        return series === undefined || series === `${name}_count`;
      })
      .reduce((sum, v) => sum + v.value, 0)
  );
}

/** Runs `act` and returns how much each of `series` grew. */
async function deltas(series: Array<[string, Record<string, string>?]>, act: () => Promise<unknown>) {
  const before = await Promise.all(series.map(([n, l]) => value(n, l)));
  await act();
  const after = await Promise.all(series.map(([n, l]) => value(n, l)));
  return after.map((a, i) => a - before[i]);
}

const create = (key: string, body: Record<string, unknown>, idempotencyKey = `idem_${randomString(16)}`) =>
  call(stack.baseUrl, 'POST', '/v1/checkout/sessions', { key, body, idempotencyKey });

it('counts a session created once, a replay of its create as replayed, another body under its key as a conflict', async () => {
  const m = await buildMerchant(stack.db);
  const key = `idem_${randomString(16)}`;
  const body = sessionBody();
  const [created, replayed, conflicts] = await deltas(
    [
      ['svc_checkout_sessions_created_total', { mode: 'test' }],
      ['svc_idempotency_total', { api: 'checkout', outcome: 'replayed' }],
      ['svc_idempotency_total', { api: 'checkout', outcome: 'conflict' }],
    ],
    async () => {
      expect((await create(m.secretKey, body, key)).status).toBe(201);
      expect((await create(m.secretKey, body, key)).status).toBe(201);
      expect((await create(m.secretKey, sessionBody(), key)).status).toBe(409);
    },
  );
  expect({ created, replayed, conflicts }).toEqual({ created: 1, replayed: 1, conflicts: 1 });
});

it('counts a session expired by the merchant and one canceled by the shopper, each once', async () => {
  const m = await buildMerchant(stack.db);
  const [expired, canceled] = await deltas(
    [
      ['svc_checkout_sessions_expired_total', { mode: 'test' }],
      ['svc_checkout_sessions_canceled_total', { mode: 'test' }],
    ],
    async () => {
      const a = (await create(m.secretKey, sessionBody())).body;
      const expire = () => call(stack.baseUrl, 'POST', `/v1/checkout/sessions/${a.id}/expire`, { key: m.secretKey });
      expect((await expire()).status).toBe(200);
      await expire(); // already expired: nothing changes, nothing is counted
      const b = (await create(m.secretKey, sessionBody())).body;
      expect((await shopper(stack, m.publishableKey)('POST', `/sessions/${b.code}/cancel`)).status).toBe(200);
    },
  );
  expect({ expired, canceled }).toEqual({ expired: 1, canceled: 1 });
});

it('counts a settled attempt by method and outcome, and the session completed by payment status', async () => {
  const m = await buildMerchant(stack.db);
  const [attempts, completed] = await deltas(
    [
      ['svc_checkout_payment_attempts_total', { mode: 'test', method: 'cashondelivery', outcome: 'succeeded' }],
      ['svc_checkout_sessions_completed_total', { mode: 'test', payment_status: 'requires_offline_collection' }],
    ],
    async () => {
      const s = (await create(m.secretKey, payableBody())).body;
      const res = await shopper(stack, m.publishableKey)('POST', `/sessions/${s.code}/attempts`, {
        body: { method: 'cashondelivery' },
      });
      expect(res.status).toBe(201);
    },
  );
  expect({ attempts, completed }).toEqual({ attempts: 1, completed: 1 });
});

it('counts OTP codes sent, refused by error code, and a code locked after the last wrong try', async () => {
  const m = await buildMerchant(stack.db);
  const s = (await create(m.secretKey, sessionBody())).body;
  const pub = shopper(stack, m.publishableKey);
  const phone = randomPhone();
  const [sent, invalid, notAllowed, locked] = await deltas(
    [
      ['svc_checkout_otp_total', { event: 'sent' }],
      ['svc_checkout_otp_total', { event: 'refused', reason: 'otp_invalid' }],
      ['svc_checkout_otp_total', { event: 'refused', reason: 'validation_error' }],
      ['svc_checkout_otp_total', { event: 'locked' }],
    ],
    async () => {
      expect((await pub('POST', `/sessions/${s.code}/otp`, { body: { phone } })).status).toBe(202);
      expect((await pub('POST', `/sessions/${s.code}/otp`, { body: { phone: '+15555550100' } })).status).toBe(400);
      for (let i = 0; i < otpRules.maxWrongCodes; i++) {
        const res = await pub('POST', `/sessions/${s.code}/otp/verify`, { body: { phone, code: '999999' } });
        expect(res.status).toBe(400);
      }
    },
  );
  expect({ sent, invalid, notAllowed, locked }).toEqual({
    sent: 1,
    invalid: otpRules.maxWrongCodes,
    notAllowed: 1,
    locked: 1,
  });
});

it('counts bulk rows by route, outcome and row code', async () => {
  const seller = await buildSeller(stack.db);
  const api = partnerClient(stack.baseUrl, seller.key);
  const [ok, missingTitle] = await deltas(
    [
      ['svc_partner_bulk_rows_total', { route: 'products', outcome: 'accepted', code: 'ok' }],
      ['svc_partner_bulk_rows_total', { route: 'products', outcome: 'rejected', code: 'validation_error' }],
    ],
    async () => {
      const res = await api.bulkProducts({
        items: [
          { external_sku: uniqueSku(), title: 'Tea', price_iqd: 6000 },
          { external_sku: uniqueSku(), price_iqd: 6000 },
        ],
      });
      expect(res.status).toBe(200);
    },
  );
  expect({ ok, missingTitle }).toEqual({ ok: 1, missingTitle: 1 });
});

it('times requests under their route template, never the path with its id', async () => {
  const m = await buildMerchant(stack.db);
  const s = (await create(m.secretKey, sessionBody())).body;
  const labels = { api: 'checkout', method: 'GET', route: '/v1/checkout/sessions/:id', status_class: '2xx' };
  const [reads, unmatched] = await deltas(
    [
      ['svc_http_request_duration_seconds', labels],
      ['svc_http_request_duration_seconds', { route: 'unmatched', status_class: '4xx' }],
    ],
    async () => {
      expect((await call(stack.baseUrl, 'GET', `/v1/checkout/sessions/${s.id}`, { key: m.secretKey })).status).toBe(
        200,
      );
      expect((await call(stack.baseUrl, 'GET', `/v1/nope/${s.id}`)).status).toBe(404);
    },
  );
  expect({ reads, unmatched }).toEqual({ reads: 1, unmatched: 1 });
  const { values } = await registry.getSingleMetric('svc_http_request_duration_seconds')!.get();
  expect(values.filter((v) => String(v.labels.route).includes(s.id))).toEqual([]);
});

it('counts a request refused with 429 by API and rate-limit policy', async () => {
  const seller = await buildSeller(stack.db);
  const api = partnerClient(stack.baseUrl, seller.key);
  const [limited] = await deltas(
    [['svc_rate_limited_total', { api: 'partner', policy: 'inventory-bulk' }]],
    async () => {
      const statuses = [];
      // Inside one fixed window, whenever the test runs.
      stack.clock.freeze(new Date(Math.ceil(Date.now() / 600_000) * 600_000 + 20_000));
      try {
        for (let i = 0; i < 3; i++) {
          statuses.push((await api.bulkInventory({ items: [{ external_sku: 'NONE', on_hand: 1 }] })).status);
        }
      } finally {
        stack.clock.unfreeze();
      }
      expect(statuses).toEqual([200, 200, 429]);
    },
  );
  expect(limited).toBe(1);
});
