import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { Readable } from 'node:stream';
import Koa from 'koa';

/** One call on the public routes (`/v1/public/*`), as the browser or a drop-in would make it. */
export interface PublicRequest {
  method: 'GET' | 'POST' | 'PUT';
  /** The path below `/v1/public`, for example `/sessions/ABCD1234`. */
  path: string;
  /** The merchant's publishable key (sent as `Authorization: Bearer …`); absent, the routes answer 401. */
  key?: string;
  /** The customer token (`X-Svc-Customer-Token`), when the shopper verified a phone. */
  customerToken?: string;
  /** A JSON body: raw bytes as the browser sent them, or a value to serialise. */
  body?: Buffer | unknown;
  /** The shopper's address, so the per-IP limits count the shopper and not this process. */
  clientIp: string;
  /** A request id to use (the public routes echo it), when the caller has one. */
  requestId?: string;
}

export interface PublicResponse {
  status: number;
  /** The JSON answer: the resource, or the Checkout error envelope. */
  body: any;
  headers: { retryAfter?: string; requestId?: string; contentType?: string };
  /** A streamed answer (`text/event-stream`): its bytes, for the caller to pipe on; `body` is then null. */
  stream?: Readable;
}

/** Calls the public routes. */
export type PublicClient = (req: PublicRequest) => Promise<PublicResponse>;

/**
 * A client that runs the public routes in this process: the request goes through the whole `/v1`
 * stack (request id, envelope, body limit, per-IP limit, publishable-key check, validation), exactly
 * as it would over HTTP, without a network hop. A hosted page deployed on its own would swap this
 * for an HTTP client with the same signature.
 */
export function inProcessPublicClient(checkoutStack: Koa.Middleware): PublicClient {
  const app = new Koa({ proxy: true });
  return async (req) => {
    const bytes =
      req.body === undefined ? null : Buffer.isBuffer(req.body) ? req.body : Buffer.from(JSON.stringify(req.body));
    const incoming = new IncomingMessage(new Socket());
    incoming.method = req.method;
    incoming.url = `/v1/public${req.path}`;
    incoming.headers = {
      host: 'hosted.internal',
      ...(req.key ? { authorization: `Bearer ${req.key}` } : {}),
      'x-forwarded-for': req.clientIp,
      ...(req.customerToken ? { 'x-svc-customer-token': req.customerToken } : {}),
      ...(req.requestId ? { 'x-request-id': req.requestId } : {}),
      ...(bytes ? { 'content-type': 'application/json', 'content-length': String(bytes.length) } : {}),
    };
    if (bytes) incoming.push(bytes);
    incoming.push(null);
    const ctx = app.createContext(incoming, new ServerResponse(incoming));
    await checkoutStack(ctx, async () => undefined);
    const headers = {
      retryAfter: ctx.response.get('retry-after') || undefined,
      requestId: ctx.response.get('x-request-id') || undefined,
      contentType: ctx.response.get('content-type') || undefined,
    };
    if (ctx.body instanceof Readable) return { status: ctx.status, body: null, headers, stream: ctx.body };
    return {
      status: ctx.status,
      // Through JSON, as an HTTP client would see it (no Date objects or shared references).
      body: ctx.body === undefined ? null : JSON.parse(JSON.stringify(ctx.body)),
      headers,
    };
  };
}
