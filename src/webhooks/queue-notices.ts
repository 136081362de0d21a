import type { ClientConfig } from 'pg';
import type { Db } from '../db/knex';
import { listenOn } from '../db/listen';

/** The channel on which the dispatcher announces, at commit, the endpoints it queued rows for. */
export const QUEUE_CHANNEL = 'webhook_queue';

/** Endpoint ids per notification (a payload must stay under Postgres's 8,000 bytes). */
const IDS_PER_NOTICE = 200;

/** Announces, in the caller's transaction (so at its commit), that rows were queued for these endpoints. */
export async function announceQueued(trx: Db, endpointIds: readonly string[]): Promise<void> {
  for (let i = 0; i < endpointIds.length; i += IDS_PER_NOTICE) {
    await trx.raw('SELECT pg_notify(?, ?)', [QUEUE_CHANNEL, endpointIds.slice(i, i + IDS_PER_NOTICE).join(',')]);
  }
}

/** One delivery activity's watch on its endpoint's announcements. */
export interface QueueWatch {
  /** True as soon as rows were announced for the endpoint since the watch began or the last call; false after `ms`. */
  announced(ms: number): Promise<boolean>;
  close(): void;
}

export interface QueueNotices {
  watch(endpointId: string): QueueWatch;
  stop(): Promise<void>;
}

interface Watcher {
  seen: boolean;
  wake?: () => void;
}

/**
 * The worker's one LISTEN on `webhook_queue`, shared by its delivery activities: an activity with
 * nothing due watches its endpoint and takes the next rows the moment the dispatcher commits them,
 * instead of ending and waiting for the workflow's next wake (a signal, a workflow task and a new
 * activity). A (re)connect counts as an announcement for every endpoint (one may have been missed).
 */
export function listenForQueuedRows(connection: string | ClientConfig): QueueNotices {
  const watchers = new Map<string, Set<Watcher>>();
  const announce = (ids: readonly string[] | null) => {
    for (const [id, set] of watchers) {
      if (ids && !ids.includes(id)) continue;
      for (const w of set) {
        w.seen = true;
        w.wake?.();
      }
    }
  };
  const listener = listenOn({
    connection,
    channel: QUEUE_CHANNEL,
    name: 'webhook queue notices',
    onNotify: (payload) => announce(payload === undefined ? null : payload.split(',')),
  });

  return {
    watch(endpointId) {
      const watcher: Watcher = { seen: false };
      const set = watchers.get(endpointId) ?? new Set<Watcher>();
      watchers.set(endpointId, set.add(watcher));
      return {
        async announced(ms) {
          if (!watcher.seen && ms > 0) {
            await new Promise<void>((resolve) => {
              const timer = setTimeout(resolve, ms);
              watcher.wake = () => {
                clearTimeout(timer);
                resolve();
              };
            });
            watcher.wake = undefined;
          }
          const seen = watcher.seen;
          watcher.seen = false;
          return seen;
        },
        close() {
          watcher.wake?.();
          set.delete(watcher);
          if (set.size === 0) watchers.delete(endpointId);
        },
      };
    },
    stop: () => listener.stop(),
  };
}
