import type { ClientConfig } from 'pg';
import { log } from '../lib/log';
import { listenOn } from './listen';

export interface NotifiedLoop {
  /** Settles once the first LISTEN is in place. */
  ready: Promise<void>;
  /** Runs a pass now and resolves when no work is left. */
  drain(): Promise<void>;
  /** No new pass starts; resolves when the running one has finished. */
  stop(): Promise<void>;
}

/**
 * Drains a table of work: runs `batch` until it returns fewer than `batchSize` rows, on every
 * NOTIFY on `channel` (if given) and every `everyMs` (for anything a lost notification missed). One pass
 * at a time; a kick during a pass makes it go round once more, so no notification is dropped.
 * `enabled: false` gives a loop that never runs (nothing to do in this process).
 */
export function startNotifiedLoop(opts: {
  /** Where and what to LISTEN on; without them the loop only polls. */
  connection?: string | ClientConfig;
  channel?: string;
  /** Who runs it, for the logs. */
  name: string;
  everyMs: number;
  batchSize: number;
  /** Does one batch of work; returns how many rows it took. */
  batch: () => Promise<number>;
  /** Runs once at the start of each pass. */
  beforePass?: () => Promise<void>;
  enabled?: boolean;
}): NotifiedLoop {
  if (opts.enabled === false) {
    return { ready: Promise.resolve(), drain: async () => undefined, stop: async () => undefined };
  }
  let stopped = false;
  let again = false;
  let running: Promise<void> | null = null;

  async function pass(): Promise<void> {
    do {
      again = false;
      await opts.beforePass?.();
      while ((await opts.batch()) === opts.batchSize && !stopped);
    } while (again && !stopped);
  }

  function kick(): Promise<void> {
    if (stopped) return running ?? Promise.resolve();
    if (running) {
      again = true;
      return running;
    }
    running = pass()
      .catch((err) =>
        log.error(`${opts.name} pass failed; the next one retries`, {
          error: err,
        }),
      )
      .finally(() => {
        running = null;
      });
    return running;
  }

  const listener =
    opts.channel && opts.connection
      ? listenOn({ connection: opts.connection, channel: opts.channel, onNotify: () => void kick(), name: opts.name })
      : { ready: Promise.resolve(), stop: async () => undefined };
  const timer = setInterval(() => void kick(), opts.everyMs);

  return {
    ready: listener.ready,
    async drain() {
      await kick();
      while (running) await running;
    },
    async stop() {
      stopped = true;
      clearInterval(timer);
      await listener.stop();
      while (running) await running;
    },
  };
}
