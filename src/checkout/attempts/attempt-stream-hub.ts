/** One LISTEN connection per API process, fanned out to the attempt event streams open in it. */
import type { ClientConfig } from 'pg';
import type { Db } from '../../db/knex';
import { ChannelListener, listenOn } from '../../db/listen';
import { log } from '../../lib/log';
import { attemptListenerReconnects, attemptNotifications } from '../../telemetry/checkout';
import { ATTEMPT_SETTLED_CHANNEL, attemptStreamRules } from './attempt-stream-rules';

/** A stream's registration: `wake` is called when its attempt may have changed. */
export interface Watcher {
  attemptId: string;
  /** The attempt's status as the stream last sent it. */
  status: () => string;
  wake: () => void;
  /** Called once when the process stops serving streams: end with a `reconnect` event. */
  drain: () => void;
}

/**
 * The process's attempt watchers. The LISTEN connection opens with the first watcher and closes
 * `lingerMs` after the last one left; a notification wakes the attempt's watchers, a (re)connect
 * wakes them all (something may have settled meanwhile), and the backstop wakes those whose
 * attempt moved without a notification, in one read for the whole process.
 */
export class AttemptStreamHub {
  private readonly watchers = new Map<string, Set<Watcher>>();
  private listener: ChannelListener | null = null;
  private linger: NodeJS.Timeout | null = null;
  private backstop: NodeJS.Timeout | null = null;
  private connects = 0;
  private draining = false;

  constructor(
    private readonly opts: {
      /** The pool's database; the LISTEN connection opens with the same settings and deadlines. */
      db: Db;
      /** The LISTEN connection's `application_name` (what pg_stat_activity shows). */
      applicationName?: string;
    },
  ) {}

  /** True once the process stopped serving streams: a new stream sends its state and ends at once. */
  get stopping(): boolean {
    return this.draining;
  }

  /** Watchers registered now. */
  get size(): number {
    let n = 0;
    for (const set of this.watchers.values()) n += set.size;
    return n;
  }

  /** Registers `watcher`; returns its unregister. */
  watch(watcher: Watcher): () => void {
    const set = this.watchers.get(watcher.attemptId) ?? new Set();
    set.add(watcher);
    this.watchers.set(watcher.attemptId, set);
    this.start();
    return () => {
      set.delete(watcher);
      if (set.size === 0 && this.watchers.get(watcher.attemptId) === set) this.watchers.delete(watcher.attemptId);
      if (this.watchers.size === 0) this.scheduleStop();
    };
  }

  /** Ends every stream with a `reconnect` event, and every later one right after its first event (a graceful stop). */
  drainStreams(): void {
    this.draining = true;
    for (const set of [...this.watchers.values()]) for (const w of [...set]) w.drain();
  }

  /** Closes the LISTEN connection and the timers now (streams still open are left to their owner). */
  async close(): Promise<void> {
    if (this.linger) clearTimeout(this.linger);
    this.linger = null;
    await this.stopListening();
  }

  private start(): void {
    if (this.linger) clearTimeout(this.linger);
    this.linger = null;
    if (this.listener) return;
    const base = this.opts.db.client.config.connection as ClientConfig;
    this.connects = 0;
    this.listener = listenOn({
      connection: { ...base, application_name: this.opts.applicationName ?? 'svc-api attempt-streams' },
      channel: ATTEMPT_SETTLED_CHANNEL,
      name: 'attempt streams',
      retryDelaysMs: attemptStreamRules.reconnectDelaysMs,
      onNotify: (payload) => this.notified(payload),
    });
    this.backstop = setInterval(() => void this.sweep(), attemptStreamRules.backstopMs);
    this.backstop.unref();
  }

  private notified(payload: string | undefined): void {
    if (payload !== undefined) {
      attemptNotifications.inc();
      for (const w of this.watchers.get(payload) ?? []) w.wake();
      return;
    }
    // A (re)connect: whatever settled while nobody listened is read again.
    this.connects += 1;
    if (this.connects > 1) {
      attemptListenerReconnects.inc();
      log.info('attempt streams listening again', { watchers: this.size });
    }
    this.wakeAll();
  }

  private wakeAll(): void {
    for (const set of this.watchers.values()) for (const w of set) w.wake();
  }

  /** One read for every watched attempt; wakes the watchers whose attempt's status is not the one they sent. */
  private async sweep(): Promise<void> {
    const ids = [...this.watchers.keys()];
    if (ids.length === 0) return;
    try {
      const rows: Array<{ id: string; status: string; awaits_verify: boolean }> = await this.opts
        .db('payment_attempts')
        .whereIn('id', ids)
        .select(
          'id',
          'status',
          // A verify whose signal failed is asked again by the stream's next read, as by the next poll.
          this.opts.db.raw(
            "(status = 'pending' and gateway = 'test' and decision is null and verify_requested_at is null) as awaits_verify",
          ),
        )
        .timeout(attemptStreamRules.backstopTimeoutMs, { cancel: true });
      for (const row of rows) {
        for (const w of this.watchers.get(row.id) ?? []) if (row.awaits_verify || w.status() !== row.status) w.wake();
      }
    } catch (err) {
      log.warn('attempt streams backstop read failed; the next one retries', { error: err });
    }
  }

  private scheduleStop(): void {
    if (this.linger || !this.listener) return;
    this.linger = setTimeout(() => {
      this.linger = null;
      if (this.watchers.size === 0) void this.stopListening();
    }, attemptStreamRules.lingerMs);
    this.linger.unref();
  }

  private async stopListening(): Promise<void> {
    if (this.backstop) clearInterval(this.backstop);
    this.backstop = null;
    const listener = this.listener;
    this.listener = null;
    await listener?.stop();
  }
}
