import { checkContract } from '../helpers/contract';

/** The tests' contract check itself: it must refuse what breaks the documents. */
const answer = (status: number, body: unknown, headers: Record<string, string> = { 'x-request-id': 'req_1' }) => ({
  status,
  headers: new Headers(headers),
  body,
  text: body === undefined ? '' : JSON.stringify(body),
});
const health = { status: 'ok', api: 'partner', version: 'v1', currency: 'IQD' };
const base = 'http://127.0.0.1:1';

it('passes an answer that matches its operation', () => {
  expect(() => checkContract('GET', `${base}/partner/v1/health`, answer(200, health))).not.toThrow();
});

it('refuses a body that breaks the schema', () => {
  expect(() => checkContract('GET', `${base}/partner/v1/health`, answer(200, { ...health, api: 'checkout' }))).toThrow(
    /breaks its schema/,
  );
});

it('refuses a status the operation does not list', () => {
  expect(() => checkContract('GET', `${base}/partner/v1/health`, answer(418, health))).toThrow(/does not list/);
});

it('refuses an error code the operation does not list for that status', () => {
  const body = { error: { code: 'order_not_found', message: 'x', request_id: 'req_1' } };
  expect(() => checkContract('GET', `${base}/partner/v1/products/ABC`, answer(404, body))).toThrow(/breaks its schema/);
  const right = { error: { code: 'product_not_found', message: 'x', request_id: 'req_1' } };
  expect(() => checkContract('GET', `${base}/partner/v1/products/ABC`, answer(404, right))).not.toThrow();
});

it('refuses an answer without a required header (Retry-After on 429)', () => {
  const body = { error: { code: 'rate_limited', message: 'x', details: [], request_id: 'req_1' } };
  const limited = {
    'x-request-id': 'req_1',
    ratelimit: '"merchant";r=0;t=1',
    'ratelimit-policy': '"merchant";q=1;w=1',
  };
  expect(() => checkContract('GET', `${base}/v1/payment_methods`, answer(429, body, limited))).toThrow(/Retry-After/);
  expect(() =>
    checkContract('GET', `${base}/v1/payment_methods`, answer(429, body, { ...limited, 'retry-after': '1' })),
  ).not.toThrow();
});

it('leaves routes no document has alone (hosted pages, wrong methods)', () => {
  expect(() => checkContract('GET', `${base}/c/ABCDEFGH`, answer(200, '<html>'))).not.toThrow();
  expect(() => checkContract('DELETE', `${base}/partner/v1/health`, answer(405, {}))).not.toThrow();
});
