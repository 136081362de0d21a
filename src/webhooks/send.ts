import { Agent, request } from 'node:https';
import type { LookupFunction } from 'node:net';
import { createSecureContext, rootCertificates } from 'node:tls';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { tracer } from '../telemetry/tracing';
import type { CheckedTarget } from './url-safety';

/** How one HTTP attempt went: a status (any answer) and an error token unless it was a 2xx. */
export interface SendResult {
  statusCode: number | null;
  /** `http_<status>` for a non-2xx (3xx included: redirects are never followed), `timeout`, or a network token. */
  error: string | null;
}

/**
 * A keep-alive agent for deliveries; `extraCa` is trusted beside Node's roots (verification stays
 * on). The roots and the extra authorities go into one TLS context made here, once: passed as `ca`,
 * Node would key every request's socket pool by the whole PEM list (a 200 KB string per request)
 * and parse the list again for every new connection.
 */
export function deliveryAgent(extraCa: readonly string[]): Agent {
  return new Agent({
    keepAlive: true,
    maxSockets: 64,
    ...(extraCa.length > 0 ? { secureContext: createSecureContext({ ca: [...rootCertificates, ...extraCa] }) } : {}),
  });
}

function networkError(err: NodeJS.ErrnoException): string {
  const code = err.code ?? '';
  if (code === 'ECONNREFUSED') return 'connection_refused';
  if (code === 'ECONNRESET' || code === 'EPIPE') return 'connection_reset';
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH') return 'unreachable';
  if (code === 'ETIMEDOUT') return 'timeout';
  if (/CERT|TLS|SSL|SELF_SIGNED|ALTNAME/.test(code)) return 'tls_error';
  return 'network_error';
}

/**
 * POSTs `body` to a checked target, connecting to the address that was checked (the host name
 * still goes in SNI, the certificate check and the Host header). Resolves, never rejects: any
 * 2xx is success; anything else, a redirect, a network error or no status within `timeoutMs` fails.
 * Traced as a client span of the active trace; the request carries none of our trace headers
 * (nothing instruments node:https, and this span injects nothing): a merchant's endpoint is not ours.
 */
export function postWebhook(
  target: CheckedTarget,
  body: string,
  headers: Record<string, string>,
  opts: { agent: Agent; timeoutMs: number },
): Promise<SendResult> {
  const attributes = { 'http.request.method': 'POST', 'server.address': target.host };
  return tracer().startActiveSpan('webhook POST', { kind: SpanKind.CLIENT, attributes }, async (span) => {
    const result = await post(target, body, headers, opts);
    if (result.statusCode !== null) span.setAttribute('http.response.status_code', result.statusCode);
    if (result.error) span.setStatus({ code: SpanStatusCode.ERROR, message: result.error });
    span.end();
    return result;
  });
}

function post(
  target: CheckedTarget,
  body: string,
  headers: Record<string, string>,
  opts: { agent: Agent; timeoutMs: number },
): Promise<SendResult> {
  const pinned: LookupFunction = (_host, options, callback) => {
    if (options.all) callback(null, [{ address: target.address, family: target.family }]);
    else callback(null, target.address, target.family);
  };
  return new Promise((resolve) => {
    let settled = false;
    let finished = false;
    const settle = (result: SendResult) => {
      if (settled) return;
      settled = true;
      resolve(result);
    };
    const req = request(
      target.url,
      {
        method: 'POST',
        agent: opts.agent,
        lookup: pinned,
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)), 'user-agent': 'svc-webhooks/1.0' },
      },
      (res) => {
        const status = res.statusCode ?? 0;
        settle({ statusCode: status, error: status >= 200 && status < 300 ? null : `http_${status}` });
        res.on('end', () => {
          finished = true;
          clearTimeout(deadline);
        });
        res.resume(); // the answer's body is not read, only drained so the connection can be reused
      },
    );
    // One deadline for the status and, after it, for draining the body (a stalled body frees its socket).
    const deadline = setTimeout(() => {
      settle({ statusCode: null, error: 'timeout' });
      if (!finished) req.destroy();
    }, opts.timeoutMs);
    req.on('error', (err) => {
      clearTimeout(deadline);
      settle({ statusCode: null, error: networkError(err) });
    });
    req.end(body);
  });
}
