import { z } from 'zod';
import {
  createDocument,
  type ZodOpenApiObject,
  type ZodOpenApiOperationObject,
  type ZodOpenApiPathsObject,
  type ZodOpenApiResponsesObject,
} from 'zod-openapi';

/** One error code an API answers with: its status and when it happens. */
export type ErrorTable = Record<string, string>;

/** One operation, as both documents declare it: the routes' own zod schemas plus what the answers look like. */
export interface OperationSpec {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** OpenAPI path relative to the API's base (`/products/{sku}`). */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tag: string;
  /** Security requirements (alternatives); empty for routes without a key. */
  security: Array<Record<string, string[]>>;
  params?: { path?: z.ZodObject; query?: z.ZodObject };
  idempotent?: boolean;
  body?: { schema: z.ZodType; example: unknown; required?: boolean };
  ok: {
    status: number;
    description: string;
    schema?: z.ZodType;
    example?: unknown;
    /** The success body's media type (default `application/json`), e.g. `text/event-stream` for a stream. */
    mediaType?: string;
  };
  /** OpenAPI links from the success response to the operations that take what it returns. */
  links?: Record<string, { operationId: string; parameters: Record<string, string> }>;
  /** A second success status with the same body (`200` when create returns an existing session). */
  alsoOk?: { status: number; description: string };
  /** `"<status> <code>"` entries of the API's error table this operation can answer with. */
  errors: string[];
  /** The RateLimit policy that counts this operation, if any. */
  rateLimit?: string;
}

/** What differs between the two APIs' documents. */
export interface ApiStyle {
  info: ZodOpenApiObject['info'];
  serverUrl: string;
  tags: Array<{ name: string; description: string }>;
  securitySchemes: NonNullable<NonNullable<ZodOpenApiObject['components']>['securitySchemes']>;
  /** The error table: `"<status> <code>"` → when. */
  errors: ErrorTable;
  /** The error envelope (a registered component); each response narrows its `code` to the codes of that status. */
  errorEnvelope: z.ZodType;
  /** Other bodies a status can have (the Partner framework shape for malformed or over-size bodies). */
  extraBodies?: Partial<Record<number, { schema: z.ZodType; example: unknown }>>;
  /** An example error body. */
  errorExample: (code: string, message: string) => unknown;
  requestIdHeader: string;
  idempotencyKey: z.ZodType;
}

const requestIdDescription =
  'Echoed on every response and as `error.request_id`; a generated `req_…` id when not sent (or not acceptable).';

const rateLimitPolicyHeader = z.string().meta({
  description:
    'The quota policy that counted this request (IETF draft-ietf-httpapi-ratelimit-headers): `"<policy>";q=<requests>;w=<window seconds>`.',
  example: '"inventory-bulk";q=60;w=600',
});
const rateLimitHeader = z.string().meta({
  description:
    'Where this client stands in that policy: `"<policy>";r=<requests remaining>;t=<seconds until the window resets>`.',
  example: '"inventory-bulk";r=42;t=317',
});
const retryAfterHeader = z
  .string()
  .regex(/^[0-9]+$/)
  .meta({ description: 'Seconds until a retry can succeed.', example: '17', header: { id: 'Retry-After' } });
const replayedHeader = z.literal('true').meta({
  description: 'Present when this is the stored response of an earlier request with the same Idempotency-Key.',
  header: { id: 'Idempotent-Replayed' },
});

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not found',
  409: 'Conflict',
  410: 'Gone',
  413: 'Request too large',
  422: 'Unprocessable',
  429: 'Too many requests',
  500: 'Internal error',
  502: 'Bad gateway',
  503: 'Service unavailable',
};

function operation(style: ApiStyle, op: OperationSpec): ZodOpenApiOperationObject {
  const requestId = z.string().optional().meta({ description: requestIdDescription, example: 'req_8f2c1d9e0a7b4c5d' });
  const header = z.object({
    [style.requestIdHeader]: requestId,
    ...(op.idempotent ? { 'Idempotency-Key': style.idempotencyKey } : {}),
  });
  const requestIdOut = z.string().meta({
    description: requestIdDescription,
    example: 'req_8f2c1d9e0a7b4c5d',
    header: { id: style.requestIdHeader },
  });
  const rateLimited = op.rateLimit
    ? {
        'RateLimit-Policy': rateLimitPolicyHeader.optional().meta({ header: { id: 'RateLimit-Policy' } }),
        RateLimit: rateLimitHeader.optional().meta({ header: { id: 'RateLimit' } }),
      }
    : {};
  const baseHeaders = { [style.requestIdHeader]: requestIdOut, ...rateLimited };

  const success = (description: string) => ({
    description,
    ...(op.links ? { links: op.links } : {}),
    headers: z.object({
      ...baseHeaders,
      ...(op.idempotent ? { 'Idempotent-Replayed': replayedHeader.optional() } : {}),
    }),
    ...(op.ok.schema
      ? {
          content: {
            [op.ok.mediaType ?? 'application/json']: {
              schema: op.ok.schema,
              ...(op.ok.example ? { example: op.ok.example } : {}),
            },
          },
        }
      : {}),
  });
  const responses: ZodOpenApiResponsesObject = { [op.ok.status]: success(op.ok.description) };
  if (op.alsoOk) responses[String(op.alsoOk.status) as `2${string}`] = success(op.alsoOk.description);

  const byStatus = new Map<number, string[]>();
  for (const entry of op.errors) {
    if (!(entry in style.errors)) throw new Error(`${op.operationId}: ${entry} is not in the error table`);
    const [status, code] = entry.split(' ');
    byStatus.set(Number(status), [...(byStatus.get(Number(status)) ?? []), code]);
  }
  const statuses = new Set(byStatus.keys());
  if (op.body) for (const status of Object.keys(style.extraBodies ?? {})) statuses.add(Number(status));
  for (const status of [...statuses].sort((a, b) => a - b)) {
    const codes = byStatus.get(status) ?? [];
    const extra = op.body ? style.extraBodies?.[status] : undefined;
    const envelope =
      codes.length > 0
        ? z.intersection(
            style.errorEnvelope,
            z.looseObject({ error: z.looseObject({ code: z.enum(codes as [string, ...string[]]) }) }),
          )
        : undefined;
    const schema = envelope && extra ? z.union([envelope, extra.schema]) : (envelope ?? extra!.schema);
    const lines = codes.map((c) => `- \`${c}\`: ${style.errors[`${status} ${c}`]}`);
    if (extra) lines.push(`- no \`code\` (\`{message, type}\`): ${style.errors[`${status} (framework)`]}`);
    responses[String(status) as `${1 | 2 | 3 | 4 | 5}${string}`] = {
      description: `${STATUS_TEXT[status] ?? 'Error'}.\n\n${lines.join('\n')}`,
      headers: z.object({
        ...baseHeaders,
        ...(status === 429 && op.rateLimit
          ? { 'RateLimit-Policy': rateLimitPolicyHeader, RateLimit: rateLimitHeader }
          : {}),
        ...(status === 429 ? { 'Retry-After': retryAfterHeader } : {}),
        // service_unavailable carries one; gateway_not_configured (a setup fault) does not.
        ...(status === 503 && codes.includes('service_unavailable')
          ? { 'Retry-After': codes.length === 1 ? retryAfterHeader : retryAfterHeader.optional() }
          : {}),
      }),
      content: {
        'application/json': {
          schema,
          example:
            codes.length > 0 ? style.errorExample(codes[0], style.errors[`${status} ${codes[0]}`]) : extra!.example,
        },
      },
    };
  }

  return {
    operationId: op.operationId,
    summary: op.summary,
    ...(op.description ? { description: op.description } : {}),
    tags: [op.tag],
    security: op.security,
    requestParams: { ...op.params, header },
    ...(op.body
      ? {
          requestBody: {
            required: op.body.required ?? true,
            content: { 'application/json': { schema: op.body.schema, example: op.body.example } },
          },
        }
      : {}),
    responses,
  };
}

/** The OpenAPI 3.1 document of one API, from its operation specs. */
export function buildDocument(style: ApiStyle, ops: OperationSpec[]) {
  const paths: ZodOpenApiPathsObject = {};
  for (const op of ops) {
    paths[op.path] = { ...paths[op.path], [op.method]: operation(style, op) };
  }
  return createDocument({
    openapi: '3.1.0',
    info: style.info,
    servers: [{ url: style.serverUrl }],
    tags: style.tags,
    paths,
    components: { securitySchemes: style.securitySchemes },
  });
}
