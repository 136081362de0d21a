import { Client as PgClient, ClientConfig } from 'pg';
import { log } from '../lib/log';
import { pgConnectionConfig } from './deadlines';

export interface ChannelListener {
  /** Settles once the first LISTEN is in place (or has failed and a retry is scheduled). */
  ready: Promise<void>;
  stop(): Promise<void>;
}

/**
 * LISTENs on `channel` over a dedicated connection (outside any pool) and calls `onNotify` for
 * each notification with its payload, and once without one after every (re)connect for whatever committed while nobody
 * listened. A lost connection is re-opened after `retryDelaysMs` (one by one, the last repeating;
 * default every second) until `stop()`; a connect and its LISTEN each have a deadline.
 */
export function listenOn(opts: {
  connection: string | ClientConfig;
  channel: string;
  /** A notification's payload; `undefined` after a (re)connect, when one may have been missed. */
  onNotify: (payload?: string) => void;
  /** Who listens, for the logs. */
  name: string;
  /** Delays before each reconnect in a row, the last one repeating; a connect that LISTENs starts it over. */
  retryDelaysMs?: readonly number[];
}): ChannelListener {
  const delays = opts.retryDelaysMs ?? [1000];
  let stopped = false;
  let client: PgClient | null = null;
  let reconnect: NodeJS.Timeout | null = null;
  let failures = 0;

  const scheduleReconnect = () => {
    if (stopped || reconnect) return;
    const delay = delays[Math.min(failures, delays.length - 1)];
    failures += 1;
    reconnect = setTimeout(() => {
      reconnect = null;
      connect().catch(() => scheduleReconnect());
    }, delay);
  };

  async function connect(): Promise<void> {
    // Keepalive and the connect and query deadlines hold here too: a LISTEN on a dead peer is found
    // and re-opened. A ClientConfig comes from pgConnectionConfig (a pool's, or the worker's own).
    const config = typeof opts.connection === 'string' ? pgConnectionConfig(opts.connection) : opts.connection;
    const next = new PgClient(config);
    next.on('notification', (message) => opts.onNotify(message.payload ?? ''));
    next.on('error', (err) => {
      log.warn(`${opts.name} lost its LISTEN connection; reconnecting`, { error: err.message });
      client = null;
      void next.end().catch(() => undefined);
      scheduleReconnect();
    });
    await next.connect();
    if (stopped) return void (await next.end());
    try {
      await next.query(`LISTEN ${opts.channel}`);
    } catch (err) {
      void next.end().catch(() => undefined);
      throw err;
    }
    client = next;
    failures = 0;
    opts.onNotify();
  }

  const ready = connect().catch((err) => {
    log.warn(`${opts.name} could not LISTEN; retrying`, { error: err });
    scheduleReconnect();
  });

  return {
    ready,
    async stop() {
      stopped = true;
      if (reconnect) clearTimeout(reconnect);
      await client?.end().catch(() => undefined);
      client = null;
    },
  };
}
