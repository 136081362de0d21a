import http from 'node:http';

export interface HttpAnswer {
  status: number;
  /** The body as text. */
  text: string;
}

/**
 * A lean HTTP client for benchmarks: node:http over keep-alive sockets (fetch costs the client
 * about 0.5 ms more per request, which would count against the route measured).
 */
export function benchHttpClient(maxSockets: number) {
  const agent = new http.Agent({ keepAlive: true, maxSockets });
  return {
    request(url: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}) {
      const headers = { ...init.headers };
      if (init.body !== undefined) headers['content-length'] = `${Buffer.byteLength(init.body)}`;
      const send = (retried: boolean) =>
        new Promise<HttpAnswer>((resolve, reject) => {
          const req = http.request(url, { method: init.method ?? 'GET', headers, agent }, (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (chunk: Buffer) => chunks.push(chunk));
            res.on('error', reject);
            res.on('end', () => resolve({ status: res.statusCode!, text: Buffer.concat(chunks).toString('utf8') }));
          });
          req.on('error', (err: NodeJS.ErrnoException) => {
            // The server closed an idle kept-alive socket as this request went out on it: the
            // request never reached it, so it is sent again once on a new socket (as Node's docs advise).
            if (req.reusedSocket && err.code === 'ECONNRESET' && !retried) resolve(send(true));
            else reject(err);
          });
          req.end(init.body);
        });
      return send(false);
    },
    close: () => agent.destroy(),
  };
}
