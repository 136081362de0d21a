import type { Context, Middleware } from 'koa';
import { bearer } from '../keys/keys';
import { attemptCookie, readCookie, tokenCookie, writeCookie } from './cookies';
import type { PublicClient } from './public-client';

export const RELAY_PREFIX = '/hosted/api/public';

const BODY_LIMIT_BYTES = 16 * 1024;
/** The last attempt is remembered for a day (an unverified attempt lives at most 24 hours). */
const ATTEMPT_COOKIE_SECONDS = 24 * 60 * 60;
/** Only plain path segments are relayed: nothing that could climb out of `/v1/public`. */
const SAFE_PATH = /^(?:\/[A-Za-z0-9_-]+)+$/;
const SESSION_PATH = /^\/sessions\/([A-Z0-9]{8,32})(?:\/|$)/;
/** The return page's attempt event stream: an EventSource cannot send the key, so the relay adds the page's own. */
const ATTEMPT_STREAM_PATH = /^\/attempts\/(pa_[A-Za-z0-9_]+)\/stream$/;

function readBody(ctx: Context): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    ctx.req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= BODY_LIMIT_BYTES) chunks.push(chunk);
    });
    ctx.req.on('end', () => resolve(size > BODY_LIMIT_BYTES ? null : Buffer.concat(chunks)));
    ctx.req.on('error', reject);
  });
}

/**
 * The page script's door to the public routes: `/hosted/api/public/<path>` is `/v1/public/<path>`
 * with the publishable key the script sends, plus the customer token from its HTTP-only cookie.
 * A verified OTP's token is moved into that cookie and taken out of the answer, so it never
 * reaches page scripts. An attempt's event stream is piped through as it comes. Cross-site pages cannot use it: they cannot send the Authorization header
 * without a CORS preflight this service never answers.
 */
export function relay(
  api: PublicClient,
  opts: {
    secureCookies: boolean;
    /** The hosted page's publishable key for the attempt's merchant and mode (none when there is no such attempt). */
    keyForAttempt: (attemptId: string) => Promise<string | undefined>;
  },
): Middleware {
  return async (ctx, next) => {
    if (!ctx.path.startsWith(`${RELAY_PREFIX}/`)) return next();
    ctx.set('Cache-Control', 'no-store');
    const path = ctx.path.slice(RELAY_PREFIX.length);
    const method = ctx.method;
    if (!SAFE_PATH.test(path) || (method !== 'GET' && method !== 'POST' && method !== 'PUT')) {
      ctx.status = 404;
      ctx.body = { error: { code: 'not_found', message: 'No such public route.', details: [] } };
      return;
    }
    const body = method === 'GET' ? undefined : await readBody(ctx);
    if (body === null) {
      ctx.status = 413;
      ctx.body = { error: { code: 'request_too_large', message: 'The request body is too large.', details: [] } };
      return;
    }
    const code = SESSION_PATH.exec(path)?.[1];
    const streamOf = method === 'GET' ? ATTEMPT_STREAM_PATH.exec(path)?.[1] : undefined;
    const res = await api({
      method,
      path: ctx.querystring ? `${path}?${ctx.querystring}` : path,
      key: bearer(ctx.get('authorization')) ?? (streamOf ? await opts.keyForAttempt(streamOf) : undefined),
      customerToken: code ? readCookie(ctx, tokenCookie(code)) : undefined,
      body,
      clientIp: ctx.ip,
      requestId: ctx.get('x-request-id') || undefined,
    });

    if (code && method === 'POST' && path === `/sessions/${code}/otp/verify` && res.status === 200) {
      const { customer_token: token, ...rest } = res.body as { customer_token: string; expires_at: string };
      const seconds = (new Date(rest.expires_at).getTime() - Date.now()) / 1000;
      writeCookie(ctx, tokenCookie(code), token, { maxAgeSeconds: seconds, secure: opts.secureCookies });
      res.body = rest;
    }
    if (code && method === 'POST' && path === `/sessions/${code}/attempts` && res.status === 201) {
      writeCookie(ctx, attemptCookie(code), String(res.body.attempt_id), {
        maxAgeSeconds: ATTEMPT_COOKIE_SECONDS,
        secure: opts.secureCookies,
      });
    }
    ctx.status = res.status;
    if (res.stream) {
      ctx.type = res.headers.contentType ?? 'text/event-stream';
      ctx.req.socket?.setTimeout(0);
      ctx.req.socket?.setNoDelay(true);
    }
    ctx.body = res.stream ?? res.body;
    if (res.headers.retryAfter) ctx.set('Retry-After', res.headers.retryAfter);
    if (res.headers.requestId) ctx.set('x-request-id', res.headers.requestId);
  };
}
