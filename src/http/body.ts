import type { Middleware } from 'koa';
import { ApiError, BodyError } from './errors';

declare module 'koa' {
  interface Request {
    /** The parsed JSON body, or undefined when the request has none. */
    body?: unknown;
    /** The raw bytes of the body as received. */
    rawBody?: Buffer;
  }
}

/** No request of either API needs more; deeper bodies would only strain recursive code downstream. */
export const MAX_NESTING = 32;

/** The deepest nesting of arrays and objects in `value`, measured without recursion. */
export function nestingDepth(value: unknown): number {
  let deepest = 0;
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (node === null || typeof node !== 'object') continue;
    deepest = Math.max(deepest, depth + 1);
    if (deepest > MAX_NESTING) return deepest;
    for (const child of Object.values(node)) stack.push([child, depth + 1]);
  }
  return deepest;
}

const METHODS_WITH_BODY = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** Reads and parses a JSON body up to `limitBytes`; malformed or larger bodies throw a BodyError. */
export function jsonBody(limitBytes: number): Middleware {
  return async (ctx, next) => {
    if (!METHODS_WITH_BODY.has(ctx.method)) return next();
    const declared = Number(ctx.get('content-length') || NaN);
    if (declared > limitBytes) {
      ctx.req.resume();
      throw new BodyError(413, 'entity.too.large', 'request entity too large');
    }
    const raw = await readLimited(ctx.req, limitBytes);
    ctx.request.rawBody = raw;
    if (raw.length === 0) return next();
    let body: unknown;
    try {
      body = JSON.parse(raw.toString('utf8'));
    } catch {
      throw new BodyError(400, 'entity.parse.failed', 'Unexpected token in JSON body');
    }
    if (nestingDepth(body) > MAX_NESTING) {
      throw ApiError.validation(`The body is nested deeper than ${MAX_NESTING} levels.`, [{ issue: 'too_deep' }]);
    }
    ctx.request.body = body;
    return next();
  };
}

export function readLimited(stream: NodeJS.ReadableStream, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (err: Error | null, value?: Buffer) => {
      if (done) return;
      done = true;
      if (err) reject(err);
      else resolve(value!);
    };
    stream.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        stream.removeAllListeners('data');
        stream.resume();
        finish(new BodyError(413, 'entity.too.large', 'request entity too large'));
        return;
      }
      chunks.push(chunk);
    });
    stream.on('end', () => finish(null, Buffer.concat(chunks)));
    stream.on('error', (e) => finish(e as Error));
  });
}
