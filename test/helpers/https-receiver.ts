import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Resolver, systemResolver } from '../../src/webhooks/url-safety';

/** The receiver's host name: resolves to 127.0.0.1 (see testResolver); tests put it on the allow-list. */
export const RECEIVER_HOST = 'receiver.webhooks.test';
/** Another name of the receiver (in its certificate too) whose resolution tests script call by call. */
export const SCRIPTED_HOST = 'scripted.webhooks.test';

/**
 * Names under `.webhooks.test` (a reserved TLD, never in real DNS) that tests resolve through
 * `testResolver`; tests may change them (to move a name between checks). Others do not resolve.
 */
export const testHosts = new Map<string, string[] | (() => string[])>([
  [RECEIVER_HOST, ['127.0.0.1']],
  ['loopback.webhooks.test', ['127.0.0.1']],
  ['v6-loopback.webhooks.test', ['::1']],
  ['private.webhooks.test', ['10.20.30.40']],
  ['link-local.webhooks.test', ['169.254.169.254']],
  ['public.webhooks.test', ['93.184.215.14']],
  ['shop.webhooks.test', ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c']],
]);

/** The stack's resolver: `testHosts` for `*.webhooks.test`, the system's for anything else. */
export const testResolver: Resolver = async (host) => {
  if (!host.endsWith('.webhooks.test')) return systemResolver(host);
  const entry = testHosts.get(host);
  const addresses = typeof entry === 'function' ? entry() : entry;
  if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
  return addresses;
};

/** One request as the receiver saw it. */
export interface ReceivedRequest {
  /** Wall-clock ms when the request's headers arrived. */
  at: number;
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /** The raw body, byte for byte. */
  body: string;
}

/** How the receiver answers one request. */
export interface Reply {
  status: number;
  headers?: Record<string, string>;
  /** Wait this long before answering (the 10-second timeout). */
  delayMs?: number;
  /** Answer only once this settles (a test holds the request open until it says so). */
  until?: Promise<unknown>;
  /** The answer's body (default `ok`, empty for a redirect). */
  body?: string | Buffer;
}

export interface HttpsReceiver {
  /** `https://receiver.webhooks.test:<port><path>`. */
  url(path?: string): string;
  port: number;
  /** The self-signed certificate (PEM), for WEBHOOK_EXTRA_CA_PATH. */
  caPath: string;
  requests: ReceivedRequest[];
  /** Decides each reply (default 200); set by tests. */
  respond: (req: ReceivedRequest) => Reply;
  /** Requests to `path`, waiting (real time) until there are at least `n`. */
  waitFor(n: number, path?: string, timeoutMs?: number): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
}

let certificate: { key: string; cert: string; certPath: string } | undefined;

/** A self-signed certificate for the receiver's name and 127.0.0.1, made once per test file with openssl. */
function selfSigned() {
  if (certificate) return certificate;
  const dir = mkdtempSync(join(tmpdir(), 'webhook-receiver-'));
  const keyPath = join(dir, 'key.pem');
  const certPath = join(dir, 'cert.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '2',
      '-subj',
      `/CN=${RECEIVER_HOST}`,
      '-addext',
      `subjectAltName=DNS:${RECEIVER_HOST},DNS:${SCRIPTED_HOST},IP:127.0.0.1`,
      '-keyout',
      keyPath,
      '-out',
      certPath,
    ],
    { stdio: 'ignore' },
  );
  certificate = { key: readFileSync(keyPath, 'utf8'), cert: readFileSync(certPath, 'utf8'), certPath };
  return certificate;
}

/** A real HTTPS server on 127.0.0.1 that records every request and answers as `respond` says. */
export async function startHttpsReceiver(): Promise<HttpsReceiver> {
  const { key, cert, certPath } = selfSigned();
  const requests: ReceivedRequest[] = [];
  const receiver = {
    requests,
    caPath: certPath,
    respond: (() => ({ status: 200 })) as HttpsReceiver['respond'],
  } as HttpsReceiver;
  const server: Server = createServer({ key, cert }, (req, res) => {
    const at = Date.now();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const seen: ReceivedRequest = {
        at,
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      requests.push(seen);
      const reply = receiver.respond(seen);
      const send = () => {
        if (res.destroyed) return;
        res.writeHead(reply.status, reply.headers ?? {});
        res.end(reply.body ?? (reply.status >= 300 && reply.status < 400 ? '' : 'ok'));
      };
      if (reply.until) void reply.until.then(send, send);
      else if (reply.delayMs) setTimeout(send, reply.delayMs).unref();
      else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  receiver.port = port;
  receiver.url = (path = '/hook') => `https://${RECEIVER_HOST}:${port}${path}`;
  receiver.waitFor = async (n, path, timeoutMs = 15_000) => {
    const matching = () => requests.filter((r) => path === undefined || r.path === path);
    const deadline = Date.now() + timeoutMs;
    while (matching().length < n) {
      if (Date.now() > deadline) throw new Error(`the receiver got ${matching().length} of ${n} requests`);
      await new Promise((r) => setTimeout(r, 25));
    }
    return matching();
  };
  receiver.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return receiver;
}
