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

  it.each(['Bearer nonsense', 'Basic Zm9vOmJhcg==', 'Bearer svc_sk_live_aaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb'])(
    'answers 200 whatever Authorization is sent (%s)',
    async (authorization) => {
      const res = await call(stack.baseUrl, 'GET', '/partner/v1/health', { headers: { authorization } });
      expect(res.status).toBe(200);
    },
  );
});
