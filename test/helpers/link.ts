import { connect, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * A TCP path on loopback to `target` (`host:port`) that a test can break the way networks break:
 * `refuse()` (nothing listens: connections are refused, open ones reset), `blackhole()` (connections
 * are accepted and open ones stay up, but no byte passes either way) and `heal()`.
 */
export interface Link {
  /** `127.0.0.1:port`, to give a process instead of `target`. */
  address: string;
  port: number;
  refuse(): Promise<void>;
  blackhole(): void;
  heal(): Promise<void>;
  close(): Promise<void>;
}

export async function startLink(target: string): Promise<Link> {
  const [host, port] = [target.slice(0, target.lastIndexOf(':')), Number(target.slice(target.lastIndexOf(':') + 1))];
  const pairs = new Set<[Socket, Socket]>();
  let silent = false;

  const server: Server = createServer((client) => {
    const upstream = connect(port, host);
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    const forward = (from: Socket, to: Socket) =>
      from.on('data', (chunk) => {
        if (!silent) to.write(chunk);
      });
    forward(client, upstream);
    forward(upstream, client);
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    for (const s of pair) s.on('error', end).on('close', end);
  });
  const listen = () =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(linkPort, '127.0.0.1', () => resolve());
    });
  let linkPort = 0;
  await listen();
  linkPort = (server.address() as AddressInfo).port;

  const closeServer = async () => {
    for (const [a, b] of pairs) {
      a.resetAndDestroy();
      b.destroy();
    }
    pairs.clear();
    if (server.listening) await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return {
    address: `127.0.0.1:${linkPort}`,
    port: linkPort,
    refuse: closeServer,
    blackhole() {
      silent = true;
    },
    async heal() {
      silent = false;
      if (!server.listening) await listen();
    },
    close: closeServer,
  };
}
