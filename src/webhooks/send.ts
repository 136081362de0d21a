/** Send: one signed POST to the checked address, and its status, duration and the first 1 KB of the answer. */
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
  /** From sending the request to the answer's status line, or to the timeout or network error. */
  durationMs: number;
  /** The start of what the endpoint answered (see `responseExcerpt`); null when it answered nothing. */
  responseBody: string | null;
}

/** How much of an answer's body is kept: the first 1 KB. */
export const RESPONSE_EXCERPT_BYTES = 1024;

/** C0 and C1 control characters other than tab and newline (a carriage return goes too). */
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/**
 * What an endpoint's answer shows a merchant: the first 1 KB of its bytes read as UTF-8 (invalid
 * bytes become U+FFFD, a character cut by the 1 KB boundary is left out), control characters other
 * than tab and newline removed, and cut again on a character boundary should the replacements make
 * it longer than 1 KB.
 */
export function responseExcerpt(bytes: Buffer): string {
  const text = new TextDecoder('utf-8', { fatal: false })
    .decode(bytes.subarray(0, RESPONSE_EXCERPT_BYTES), { stream: true })
    .replace(CONTROL, '');
  if (Buffer.byteLength(text) <= RESPONSE_EXCERPT_BYTES) return text;
  let cut = '';
  for (const ch of text) {
    if (Buffer.byteLength(cut) + Buffer.byteLength(ch) > RESPONSE_EXCERPT_BYTES) break;
    cut += ch;
  }
  return cut;
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
 * The first 1 KB of the answer is read (within the same deadline) and the rest drained.
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
  const started = performance.now();
  return new Promise((resolve) => {
    let settled = false;
    let finished = false;
    let answered: { statusCode: number; durationMs: number } | undefined;
    const chunks: Buffer[] = [];
    let read = 0;
    const settle = (result: Omit<SendResult, 'durationMs'> & { durationMs?: number }) => {
      if (settled) return;
      settled = true;
      resolve({ ...result, durationMs: result.durationMs ?? Math.round(performance.now() - started) });
    };
    /** Settles with the status and the answer read so far (the whole of it, or its first 1 KB). */
    const settleAnswered = () => {
      if (!answered) return;
      const { statusCode, durationMs } = answered;
      const ok = statusCode >= 200 && statusCode < 300;
      settle({
        statusCode,
        error: ok ? null : `http_${statusCode}`,
        durationMs,
        responseBody: responseExcerpt(Buffer.concat(chunks)),
      });
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
        answered = { statusCode: res.statusCode ?? 0, durationMs: Math.round(performance.now() - started) };
        res.on('data', (chunk: Buffer) => {
          if (read >= RESPONSE_EXCERPT_BYTES) return; // the rest is drained unread, so the connection can be reused
          chunks.push(chunk);
          read += chunk.length;
          if (read >= RESPONSE_EXCERPT_BYTES) settleAnswered();
        });
        res.on('end', () => {
          finished = true;
          clearTimeout(deadline);
          settleAnswered();
        });
        res.on('aborted', settleAnswered);
        res.on('error', settleAnswered);
      },
    );
    // One deadline for the status and, after it, for reading the body (a stalled body frees its socket).
    const deadline = setTimeout(() => {
      if (answered) settleAnswered();
      else settle({ statusCode: null, error: 'timeout', responseBody: null });
      if (!finished) req.destroy();
    }, opts.timeoutMs);
    req.on('error', (err) => {
      clearTimeout(deadline);
      if (answered) settleAnswered();
      else settle({ statusCode: null, error: networkError(err), responseBody: null });
    });
    req.end(body);
  });
}
