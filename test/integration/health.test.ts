import { call } from '../helpers/http';
import { startStack, Stack } from '../helpers/stack';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack.stop());

describe('GET /partner/v1/health', () => {
  it('answers 200 with the health document and needs no key', async () => {
    const res = await call(stack.baseUrl, 'GET', '/partner/v1/health');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok', api: 'partner', version: 'v1', currency: 'IQD' });
  });

  it.each([
    'Bearer nonsense',
    'Basic Zm9vOmJhcg==',
    'Bearer svc_sk_live_aaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb',
  ])('answers 200 whatever Authorization is sent (%s)', async (authorization) => {
    const res = await call(stack.baseUrl, 'GET', '/partner/v1/health', { headers: { authorization } });
    expect(res.status).toBe(200);
  });
});

describe('unknown routes and methods', () => {
  it('answers an unknown Partner route with 404 not_found in the Partner envelope', async () => {
    const res = await call(stack.baseUrl, 'GET', '/partner/v1/nope', { headers: { 'x-request-id': 'abc' } });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: { code: 'not_found', message: expect.any(String), request_id: 'abc' } });
  });

  it('answers a wrong method with 405 method_not_allowed', async () => {
    const res = await call(stack.baseUrl, 'POST', '/partner/v1/health', { body: {} });
    expect(res.status).toBe(405);
    expect(res.body.error.code).toBe('method_not_allowed');
    expect(res.headers.get('allow')).toContain('GET');
  });

  it('answers an unknown Checkout route with 404 in the Checkout envelope', async () => {
    const res = await call(stack.baseUrl, 'GET', '/v1/nope');
    expect(res.status).toBe(404);
    expect(res.body).toEqual({
      error: {
        code: 'not_found',
        message: expect.any(String),
        details: [],
        request_id: expect.stringMatching(/^req_/),
      },
    });
    expect(res.headers.get('x-request-id')).toBe(res.body.error.request_id);
  });
});

describe('paths outside both APIs, the hosted page and /docs', () => {
  it.each([
    ['GET', '/'],
    ['GET', '/metrics'],
    ['GET', '/docs/nope.js'],
    ['POST', '/docs'],
    ['GET', '/partner-v1/health'],
    ['HEAD', '/favicon.ico'],
  ])('%s %s answers 404 Not Found with its JSON body', async (method, path) => {
    const res = await fetch(stack.baseUrl + path, { method });
    expect(res.status).toBe(404);
    expect(res.statusText).toBe('Not Found');
    const text = await res.text();
    if (method === 'HEAD') expect(text).toBe('');
    else expect(JSON.parse(text)).toEqual({ message: 'Not Found', type: 'not_found' });
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  });
});
