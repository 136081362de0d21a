/** Queue announcements: a NOTIFY at fan-out's commit, and the worker's one LISTEN that hands new rows to a waiting send. */
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

/** One delivery activity's watch on its endpoint's announcements; `close()` ends it. */
export interface QueueWatch {
  close(): void;
}

export interface QueueNotices {
  /** Calls `onAnnounced` each time rows are announced for the endpoint, until the watch is closed. */
  watch(endpointId: string, onAnnounced: () => void): QueueWatch;
  stop(): Promise<void>;
}

/**
 * The worker's one LISTEN on `webhook_queue`, shared by its delivery activities: an activity with
 * a free slot watches its endpoint and takes the next rows the moment the dispatcher commits them,
 * instead of ending and waiting for the workflow's next wake (a signal, a workflow task and a new
 * activity). A (re)connect counts as an announcement for every endpoint (one may have been missed).
 */
export function listenForQueuedRows(connection: string | ClientConfig): QueueNotices {
  const watchers = new Map<string, Set<() => void>>();
  const announce = (ids: readonly string[] | null) => {
    for (const [id, set] of watchers) {
      if (ids && !ids.includes(id)) continue;
      for (const onAnnounced of set) onAnnounced();
    }
  };
  const listener = listenOn({
    connection,
    channel: QUEUE_CHANNEL,
    name: 'webhook queue notices',
    onNotify: (payload) => announce(payload === undefined ? null : payload.split(',')),
  });

  return {
    watch(endpointId, onAnnounced) {
      const set = watchers.get(endpointId) ?? new Set<() => void>();
      watchers.set(endpointId, set.add(onAnnounced));
      return {
        close() {
          set.delete(onAnnounced);
          if (set.size === 0 && watchers.get(endpointId) === set) watchers.delete(endpointId);
        },
      };
    },
    stop: () => listener.stop(),
  };
}
