import { buildMerchant, buildSeller } from '../helpers/factories';
import { request } from 'node:http';
import { startStack, Stack } from '../helpers/stack';

/** What `npm run fuzz` (Schemathesis) found, one test per finding, so it stays fixed. */

/** A raw HTTP request: fetch refuses TRACE, Schemathesis does not. */
function raw(method: string, path: string, key?: string): Promise<{ status: number; allow?: string; body: any }> {
  return new Promise((resolve, reject) => {
    const req = request(
      stack.baseUrl + path,
      { method, headers: key ? { authorization: `Bearer ${key}` } : {} },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode!,
            allow: res.headers.allow,
            body: JSON.parse(Buffer.concat(chunks).toString('utf8')),
          }),
        );
      },
    );
    req.on('error', reject);
    req.end();
  });
}
let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack.stop());

describe('a method no route implements (TRACE) is the client’s mistake, never a 5xx', () => {
  it('Partner: 405 method_not_allowed with Allow, in the Partner envelope', async () => {
    const s = await buildSeller(stack.db);
    const res = await raw('TRACE', '/partner/v1/products', s.key);
    expect(res.status).toBe(405);
    expect(res.allow).toContain('GET');
    expect(res.body.error).toMatchObject({ code: 'method_not_allowed', request_id: expect.any(String) });
  });

  it('Checkout: 405 method_not_allowed with Allow, in the Checkout envelope', async () => {
    const m = await buildMerchant(stack.db);
    const res = await raw('TRACE', '/v1/checkout/sessions', m.secretKey);
    expect(res.status).toBe(405);
    expect(res.allow).toContain('POST');
    expect(res.body.error).toMatchObject({ code: 'method_not_allowed', details: [] });
  });

  it('on a path no route has: 404 not_found', async () => {
    const res = await raw('TRACE', '/v1/no-such-thing');
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('not_found');
  });
});
