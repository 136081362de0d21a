import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { validate, compileErrors } from '@readme/openapi-parser';
import { checkoutRouter } from '../../src/checkout/routes';
import { loadSettings } from '../../src/config';
import { documents, documentText } from '../../src/openapi/documents';
import { partnerRouter } from '../../src/partner/routes';

/** The OpenAPI documents: valid OpenAPI 3.1, and the committed copies are what the zod schemas generate. */
describe.each(Object.entries(documents))('docs/openapi/%s', (file, make) => {
  it('passes the OpenAPI validator', async () => {
    const result = await validate(JSON.parse(JSON.stringify(make())));
    if (!result.valid) throw new Error(compileErrors(result));
    expect(result.specification).toBe('OpenAPI');
    expect(result.warnings).toEqual([]);
  });

  it('is committed as generated (run `npm run openapi` after changing a schema)', () => {
    const committed = readFileSync(join(__dirname, '..', '..', 'docs', 'openapi', file), 'utf8');
    expect(committed).toBe(documentText(make()));
  });

  it('gives every operation an id, a summary, a success response with an example and documented errors', () => {
    const doc = make() as Record<string, any>;
    for (const [path, item] of Object.entries(doc.paths as Record<string, any>)) {
      for (const [method, op] of Object.entries(item as Record<string, any>)) {
        const where = `${method.toUpperCase()} ${path}`;
        expect([where, typeof op.operationId, typeof op.summary]).toEqual([where, 'string', 'string']);
        const statuses = Object.keys(op.responses);
        expect([where, statuses.some((s) => s.startsWith('5'))]).toEqual([where, true]);
        for (const s of statuses.filter((s) => !s.startsWith('2'))) {
          expect([where, s, op.responses[s].content['application/json'].example !== undefined]).toEqual([
            where,
            s,
            true,
          ]);
        }
        if (op.requestBody)
          expect([where, op.requestBody.content['application/json'].example]).not.toEqual([where, undefined]);
      }
    }
  });
});

describe('the documents cover the routers', () => {
  it('document every route of both APIs, and nothing that is not a route', () => {
    const settings = loadSettings({ DATABASE_URL: 'postgres://unused@127.0.0.1/unused', LOG_LEVEL: 'silent' });
    const deps = { db: {} as never, settings, clock: () => new Date(), temporal: {} as never };
    const routed = (router: { stack: Array<{ path: string | RegExp; methods: string[] }> }, prefix: string) =>
      router.stack.flatMap((layer) =>
        layer.methods
          .filter((m) => m !== 'HEAD')
          .map(
            (m) =>
              `${m} ${String(layer.path)
                .slice(prefix.length)
                .replace(/:([A-Za-z]+)/g, '{$1}')}`,
          ),
      );
    const documented = (doc: Record<string, any>) =>
      Object.entries(doc.paths as Record<string, object>).flatMap(([path, item]) =>
        Object.keys(item).map((m) => `${m.toUpperCase()} ${path.replace(/\{[^}]+\}/g, '{p}')}`),
      );
    const generic = (routes: string[]) => routes.map((r) => r.replace(/\{[^}]+\}/g, '{p}')).sort();
    const undocumented = ['GET /openapi.json'];
    expect(generic(routed(partnerRouter(deps), '/partner/v1'))).toEqual(
      generic([...documented(documents['partner.json']()), ...undocumented]),
    );
    expect(generic(routed(checkoutRouter(deps), '/v1'))).toEqual(
      generic([...documented(documents['checkout.json']()), ...undocumented]),
    );
  });
});
