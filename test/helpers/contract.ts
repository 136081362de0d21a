import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { documents } from '../../src/openapi/documents';

/**
 * The contract check every integration test's HTTP answer goes through (see `call`): an answer of
 * a documented operation must have a status the document lists for it, a body that validates
 * against that response's schema (JSON Schema 2020-12, as OpenAPI 3.1 uses) and its required
 * headers. Requests that match no documented operation (hosted pages, probe routes, wrong
 * methods) are not checked.
 */

type Json = Record<string, any>;

interface Route {
  method: string;
  pattern: RegExp;
  /** Path parameters in the template; a literal segment wins over a parameter. */
  params: number;
  doc: string;
  pointer: string;
  operation: Json;
}

const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
addFormats(ajv);

const escape = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

/** Each document generated once: building one takes long enough to stall the event loop. */
const docs: Record<string, Json> = Object.fromEntries(Object.entries(documents).map(([file, make]) => [file, make()]));

const routes: Route[] = Object.entries(docs).flatMap(([file, doc]) => {
  ajv.addSchema(doc, file);
  const base = doc.servers[0].url as string;
  return Object.entries(doc.paths as Json).flatMap(([path, item]) =>
    Object.entries(item as Json).map(([method, operation]) => ({
      method: method.toUpperCase(),
      pattern: new RegExp(`^${base}${path.replace(/\{[^}]+\}/g, '[^/]+')}$`),
      params: (path.match(/\{/g) ?? []).length,
      doc: file,
      pointer: `#/paths/${escape(path)}/${method}`,
      operation: operation as Json,
    })),
  );
});

const validators = new Map<string, ValidateFunction>();
function validator(doc: string, pointer: string): ValidateFunction {
  const id = `${doc}${pointer}`;
  let v = validators.get(id);
  if (!v) {
    v = ajv.getSchema(id);
    if (!v) throw new Error(`contract: no schema at ${id}`);
    validators.set(id, v);
  }
  return v;
}

function headerObject(doc: string, header: Json): Json {
  if (!header.$ref) return header;
  const name = (header.$ref as string).split('/').pop()!;
  return docs[doc].components.headers[name];
}

/** Throws when the answer to `method url` breaks its operation's documented response. */
export function checkContract(
  method: string,
  url: string,
  res: { status: number; headers: Headers; body: unknown; text: string },
): void {
  const path = new URL(url).pathname;
  const route = routes
    .filter((r) => r.method === method.toUpperCase() && r.pattern.test(path))
    .sort((a, b) => a.params - b.params)[0];
  if (!route) return;
  const where = `${method} ${path} (${route.operation.operationId}) answered ${res.status}`;
  const response = route.operation.responses[String(res.status)] as Json | undefined;
  if (!response) throw new Error(`contract: ${where}, a status the OpenAPI document does not list: ${res.text}`);
  for (const [name, header] of Object.entries((response.headers ?? {}) as Json)) {
    if (headerObject(route.doc, header).required && !res.headers.has(name)) {
      throw new Error(`contract: ${where} without its required ${name} header`);
    }
  }
  const media = response.content?.['application/json'];
  if (!media) {
    // A body of another media type (an event stream) is the route's own tests' to check.
    if (response.content) return;
    if (res.text !== '') throw new Error(`contract: ${where} with a body the document does not have: ${res.text}`);
    return;
  }
  const validate = validator(route.doc, `${route.pointer}/responses/${res.status}/content/application~1json/schema`);
  if (!validate(res.body)) {
    const problems = (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message}`).join('; ');
    throw new Error(`contract: ${where} with a body that breaks its schema (${problems}): ${res.text.slice(0, 2000)}`);
  }
}
