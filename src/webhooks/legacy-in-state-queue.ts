/** Legacy: the old `deliveryWorkflow`'s in-state queue, deleted with that type (docs/workflows.md says when). */
import type { DeliveryState, PendingDelivery } from '../temporal/delivery';

/** How many finished deliveries a queue remembers to ignore a repeated signal (the DB catches older ones). */
export const RECENT_KEYS = 2000;

const keyOf = (d: { eventId: string; generation: number }) => `${d.eventId}#${d.generation}`;

/**
 * The delivery workflow's queue, as plain data: pending deliveries in due order, the ones in
 * flight, and recently finished keys. Pure (no I/O, no clock), so the workflow can use it.
 */
export class DeliveryQueue {
  private readonly pending: PendingDelivery[];
  private readonly inFlight = new Set<string>();
  private readonly recent: string[];
  private readonly known = new Set<string>();

  constructor(state?: Pick<DeliveryState, 'pending' | 'recent'>) {
    this.pending = (state?.pending ?? []).map(([eventId, generation, attemptNo, dueAtMs]) => ({
      eventId,
      generation,
      attemptNo,
      dueAtMs,
    }));
    this.recent = [...(state?.recent ?? [])];
    for (const d of this.pending) this.known.add(keyOf(d));
    for (const k of this.recent) this.known.add(k);
  }

  get size(): number {
    return this.pending.length;
  }

  get inFlightCount(): number {
    return this.inFlight.size;
  }

  /** Queues attempt 1 of a delivery, due at `nowMs`; false when it is pending, in flight or recently done. */
  add(eventId: string, generation: number, nowMs: number): boolean {
    const key = keyOf({ eventId, generation });
    if (this.known.has(key)) return false;
    this.known.add(key);
    this.insert({ eventId, generation, attemptNo: 1, dueAtMs: nowMs });
    return true;
  }

  /** Takes the earliest delivery due at `nowMs` and marks it in flight. */
  takeDue(nowMs: number): PendingDelivery | undefined {
    if (this.pending.length === 0 || this.pending[0].dueAtMs > nowMs) return undefined;
    const next = this.pending.shift()!;
    this.inFlight.add(keyOf(next));
    return next;
  }

  /** The in-flight delivery failed: its next attempt is due at `dueAtMs`. */
  retry(d: PendingDelivery, dueAtMs: number): void {
    this.inFlight.delete(keyOf(d));
    this.insert({ ...d, attemptNo: d.attemptNo + 1, dueAtMs });
  }

  /** The in-flight delivery could not be attempted: the same attempt again at `dueAtMs`. */
  putBack(d: PendingDelivery, dueAtMs: number): void {
    this.inFlight.delete(keyOf(d));
    this.insert({ ...d, dueAtMs });
  }

  /** The in-flight delivery is over (delivered, out of attempts, or its endpoint is gone). */
  finish(d: PendingDelivery): void {
    const key = keyOf(d);
    this.inFlight.delete(key);
    this.recent.push(key);
    while (this.recent.length > RECENT_KEYS) this.known.delete(this.recent.shift()!);
  }

  /** When the earliest pending delivery is due, if any. */
  nextDueAtMs(): number | undefined {
    return this.pending[0]?.dueAtMs;
  }

  /** Removes and returns every pending delivery (not those in flight). */
  drain(): PendingDelivery[] {
    const all = this.pending.splice(0);
    for (const d of all) this.finish(d);
    return all;
  }

  /** The queue as data for continue-as-new (nothing may be in flight). */
  snapshot(): Pick<DeliveryState, 'pending' | 'recent'> {
    if (this.inFlight.size > 0) throw new Error('snapshot with deliveries in flight');
    return {
      pending: this.pending.map((d) => [d.eventId, d.generation, d.attemptNo, d.dueAtMs]),
      recent: [...this.recent],
    };
  }

  /** Inserts in due order, after equal due times (binary search: the queue may hold thousands). */
  private insert(d: PendingDelivery): void {
    let lo = 0;
    let hi = this.pending.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.pending[mid].dueAtMs <= d.dueAtMs) lo = mid + 1;
      else hi = mid;
    }
    this.pending.splice(lo, 0, d);
  }
}
