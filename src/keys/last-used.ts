import type { Db } from '../db/knex';
import { errorText, log } from '../lib/log';

/** How fine "last used" is: a key's `last_used_at` moves at most once per this many milliseconds. */
export const LAST_USED_RESOLUTION_MS = 60_000;
/** Keys remembered per process before the stale ones are forgotten (each entry is a key that authenticated). */
const MAX_REMEMBERED = 10_000;

/**
 * Keys' "last used" (shown on the console's key pages) without a write per request: a process
 * writes for a key at most once per minute, and the UPDATE itself only moves a value a minute old
 * or more, so several processes together write at most about once a minute too. The write is
 * started, not awaited: a slow or failing database never delays or fails the request that used
 * the key (a failure is logged, and the next use a minute later tries again).
 */
export class KeyUse {
  /** Key id → when this process last wrote (or tried to) for it, in clock milliseconds. */
  private readonly written = new Map<string, number>();
  private readonly inFlight = new Set<Promise<void>>();

  constructor(private readonly table: 'partner_keys' | 'checkout_keys') {}

  /** Whether a use at `now` (ms) is to be written; when it is, notes it as written. */
  due(keyId: string, now: number): boolean {
    const last = this.written.get(keyId);
    if (last !== undefined && now - last < LAST_USED_RESOLUTION_MS) return false;
    if (this.written.size >= MAX_REMEMBERED) this.forgetBefore(now - LAST_USED_RESOLUTION_MS);
    this.written.set(keyId, now);
    return true;
  }

  /** Records that `keyId` authenticated a request at `at`, in the background. */
  record(db: Db, keyId: string, at: Date): void {
    if (!this.due(keyId, at.getTime())) return;
    const write = this.write(db, keyId, at);
    this.inFlight.add(write);
    void write.finally(() => this.inFlight.delete(write));
  }

  private async write(db: Db, keyId: string, at: Date): Promise<void> {
    try {
      await db(this.table)
        .where({ id: keyId })
        .andWhere((q) =>
          q.whereNull('last_used_at').orWhere('last_used_at', '<=', new Date(at.getTime() - LAST_USED_RESOLUTION_MS)),
        )
        .update({ last_used_at: at });
    } catch (err) {
      log.warn('key last-used write failed', { table: this.table, key_id: keyId, error: errorText(err) });
    }
  }

  /** Resolves once every write started so far has ended (tests; a process that stops). */
  async settled(): Promise<void> {
    await Promise.all([...this.inFlight]);
  }

  private forgetBefore(cutoff: number): void {
    for (const [keyId, at] of this.written) if (at < cutoff) this.written.delete(keyId);
    // Every key used within the minute: start over (at worst one more write each).
    if (this.written.size >= MAX_REMEMBERED) this.written.clear();
  }
}

/** The process's recorders: Partner keys (partner-auth.ts) and Checkout keys (checkout-auth.ts). */
export const partnerKeyUse = new KeyUse('partner_keys');
export const checkoutKeyUse = new KeyUse('checkout_keys');
