/** A stopping HTTP server: answers that close their connections during the drain, then the close with its bound. */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { requestsDuringStop } from '../telemetry/http';

export interface ServerDrain {
  /** Requests being answered now. */
  inFlight(): number;
  /**
   * From now on every answer closes its connection (`Connection: close`), those of the requests in
   * flight included, so keep-alive clients open their next connection elsewhere.
   */
  closeConnectionsAfterAnswers(): void;
  /**
   * Stops accepting connections and closes the idle ones; waits up to `timeoutMs` for the requests
   * in flight, then closes every connection left. Resolves with how many requests were in flight
   * when it began and how many were cut (their connection closed unanswered).
   */
  close(timeoutMs: number): Promise<{ inFlight: number; cut: number }>;
}

/** Tracks `server`'s requests (call before it listens) so that a stop can drain it. */
export function drainable(server: Server): ServerDrain {
  const answering = new Set<ServerResponse>();
  let draining = false;
  let onIdle: (() => void) | undefined;
  server.prependListener('request', (_req: IncomingMessage, res: ServerResponse) => {
    answering.add(res);
    if (draining) res.shouldKeepAlive = false;
    res.once('close', () => {
      answering.delete(res);
      if (draining && res.writableFinished) requestsDuringStop.inc({ outcome: 'answered' });
      if (answering.size === 0) onIdle?.();
    });
  });

  return {
    inFlight: () => answering.size,
    closeConnectionsAfterAnswers() {
      draining = true;
      // Node writes `Connection: close` and ends the socket after the answer while this is false.
      for (const res of answering) if (!res.headersSent) res.shouldKeepAlive = false;
    },
    async close(timeoutMs) {
      const inFlight = answering.size;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      if (answering.size > 0) {
        let timer: NodeJS.Timeout | undefined;
        await new Promise<void>((resolve) => {
          onIdle = resolve;
          timer = setTimeout(resolve, timeoutMs);
        });
        clearTimeout(timer);
        onIdle = undefined;
      }
      const cut = answering.size;
      if (cut > 0) requestsDuringStop.inc({ outcome: 'cut' }, cut);
      // What is left: requests past the bound, and connections that never sent one.
      server.closeAllConnections();
      await closed;
      return { inFlight, cut };
    },
  };
}
