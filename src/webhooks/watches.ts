/**
 * Watches: a delivery activity records, for its endpoint, until when it watches the endpoint's
 * queue (it hears the dispatcher's announcement and claims the new rows at once), and the
 * dispatcher sends no wake signal to an endpoint watched (a signal, a workflow task and a history
 * event saved per pass).
 *
 * Why no row is lost: the dispatcher reads the watches FOR SHARE in the transaction that queues the
 * rows, so its lock holds until they commit; the activity ends its watch with an UPDATE, which
 * waits for that lock, and only then reads the queue one last time (its result tells the workflow
 * what is due, and the workflow runs another activity for it). A dispatcher that found the watch
 * ended wakes the endpoint. A row committed while the watch held is heard by the activity, or seen
 * by that last read. A watch whose activity died lapses at `watching_until` (a few seconds); the
 * rows queued meanwhile wait for the activity's retry or the dispatcher's overdue sweep.
 */
import type { Db } from '../db/knex';

/** Records that the endpoint's queue is watched for `forMs` from now (one statement). */
export async function startWatching(db: Db, endpointId: string, forMs: number): Promise<void> {
  await db.raw(
    `INSERT INTO webhook_endpoint_watches (endpoint_id, watching_until)
     VALUES (?, clock_timestamp() + make_interval(secs => ?))
     ON CONFLICT (endpoint_id) DO UPDATE SET watching_until = excluded.watching_until`,
    [endpointId, forMs / 1000],
  );
}

/**
 * Ends the endpoint's watch: waits for every dispatcher transaction that found it watched to
 * commit, so that a read of the queue after this sees their rows. Another activity of the same
 * endpoint still watching loses its watch too (its endpoint is woken meanwhile: harmless).
 */
export async function stopWatching(db: Db, endpointId: string): Promise<void> {
  await db.raw(`UPDATE webhook_endpoint_watches SET watching_until = '-infinity' WHERE endpoint_id = ?`, [endpointId]);
}

/** Of `endpointIds`, the ones watched now, locked FOR SHARE until the caller's transaction ends. */
export async function watchedEndpoints(trx: Db, endpointIds: readonly string[]): Promise<Set<string>> {
  if (endpointIds.length === 0) return new Set();
  const { rows } = await trx.raw(
    `SELECT endpoint_id FROM webhook_endpoint_watches
      WHERE endpoint_id = ANY(?::text[]) AND watching_until > clock_timestamp()
      FOR SHARE`,
    [[...endpointIds]],
  );
  return new Set((rows as Array<{ endpoint_id: string }>).map((r) => r.endpoint_id));
}
