import type { Knex } from 'knex';

/**
 * Fills `webhook_undelivered` (20261125120000_delivery_responses, created empty) from the attempts
 * recorded before it existed, so that `GET /v1/events?delivery_success=false` lists those events
 * too. The rule is src/webhooks/record.ts's (trackUndelivered): an (event, endpoint) pair is listed
 * when one of its rows failed (an attempt made, or refused because the endpoint is disabled; never
 * an `endpoint_deleted` row) and none of its rows, in any generation, succeeded: a failed
 * redelivery of a delivered event is not undelivered. Only events within retention
 * (`event_log_retention.cutoff`), with their own merchant, mode and created_at, and only for
 * endpoints that still exist (deleting one removes its rows). A pair that has a success and a row
 * is removed, so a run is a reconcile of the range it reads. `webhook_queue` plays no part.
 *
 * On a loaded database: `event_deliveries` is read in chunks of whole events along its primary key
 * (about CHUNK_ROWS rows: one short read-only statement), and each endpoint found in a chunk gets
 * its own short transaction; nothing holds a lock across chunks, and a partition's DDL from the
 * janitor waits at most for one statement (it gives up after 100 ms and retries at its next sweep).
 * Idempotent: ON CONFLICT DO NOTHING, and a run stopped midway can run again. An event that
 * passes the cutoff while this runs may be listed after the janitor's purge: the list hides it
 * from the cutoff on, and the next hourly sweep deletes its row.
 *
 * Against the live recorder: each endpoint's transaction first takes its `webhook_endpoints` row
 * FOR SHARE, which conflicts with the row lock recordAttempts takes (UPDATE … SET failing_since =
 * NULL) in every transaction that records a success, before it deletes the pair from the list; the
 * insert then re-checks "no success" in a statement begun after the lock was granted. Either the
 * recorder's transaction committed first (the re-check sees its success: nothing inserted), or it
 * waits for ours (its DELETE, a later statement, sees our row and removes it). A failure recorded
 * meanwhile is inserted by the recorder itself, ON CONFLICT on the same key. One endpoint row is
 * held at a time, so no lock-order deadlock with a recorder (which locks one).
 *
 * The previous release (20261124170000) does not keep `webhook_undelivered`: what it records while
 * it still runs, after this has read a chunk, is not reflected (a failure not listed; a success
 * after a listed failure not unlisted) until that pair's next attempt under this release. The same
 * pass, run again once only this release records (`ops webhook-endpoint reconcile-undelivered`),
 * makes the list exact.
 */
export const config = { transaction: false };

/** Delivery rows read per chunk (a chunk ends at a whole event, so a few more). */
const CHUNK_ROWS = 5_000;

/** A row that lists its pair: what trackUndelivered inserts for (recorded, not delivered). */
const FAILED = `error IS NOT NULL AND (delivered_at IS NOT NULL OR error = 'endpoint_disabled')`;

interface Found {
  endpoint_id: string;
  event_ids: string[] | null;
  merchant_ids: string[] | null;
  modes: string[] | null;
  created_ats: Date[] | null;
  delivered_ids: string[] | null;
}

/**
 * One chunk's pairs (events after `after`, up to `upTo` or the end) per existing endpoint: those to
 * list (failed, never delivered, event within retention) with their event's tenant and time, and
 * those listed though delivered.
 */
const chunkSql = (bounded: boolean) => `
  WITH pairs AS (
    SELECT event_id, endpoint_id, bool_or(${FAILED}) AS failed, bool_or(error IS NULL) AS delivered
      FROM event_deliveries
     WHERE event_id > ?${bounded ? ' AND event_id <= ?' : ''}
     GROUP BY event_id, endpoint_id
  ), listed AS (
    SELECT p.endpoint_id, array_agg(e.id ORDER BY e.id) AS event_ids,
           array_agg(e.merchant_id ORDER BY e.id) AS merchant_ids, array_agg(e.mode ORDER BY e.id) AS modes,
           array_agg(e.created_at ORDER BY e.id) AS created_ats
      FROM pairs p
      JOIN events e ON e.id = p.event_id AND e.created_at >= (SELECT cutoff FROM event_log_retention)
     WHERE p.failed AND NOT p.delivered
     GROUP BY p.endpoint_id
  ), stale AS (
    SELECT p.endpoint_id, array_agg(p.event_id ORDER BY p.event_id) AS delivered_ids
      FROM pairs p JOIN webhook_undelivered u ON u.endpoint_id = p.endpoint_id AND u.event_id = p.event_id
     -- The chunk range again: read through webhook_undelivered_event, not the whole list.
     WHERE p.delivered AND u.event_id > ?${bounded ? ' AND u.event_id <= ?' : ''}
     GROUP BY p.endpoint_id
  )
  SELECT endpoint_id, event_ids, merchant_ids, modes, created_ats, delivered_ids
    FROM listed FULL JOIN stale USING (endpoint_id)
   WHERE EXISTS (SELECT 1 FROM webhook_endpoints w WHERE w.id = endpoint_id)
   ORDER BY endpoint_id`;

/** Lists, under the endpoint's row lock, the chunk's pairs still undelivered; unlists the delivered ones. */
async function applyToEndpoint(knex: Knex, found: Found, range: readonly string[]): Promise<number> {
  return knex.transaction(async (trx) => {
    const { rows } = await trx.raw(`SELECT 1 FROM webhook_endpoints WHERE id = ? FOR SHARE`, [found.endpoint_id]);
    if (rows.length === 0) return 0; // deleted meanwhile: its pairs are not listed
    let inserted = 0;
    if (found.event_ids) {
      const result = await trx.raw(
        `INSERT INTO webhook_undelivered (event_id, endpoint_id, merchant_id, mode, event_created_at)
         SELECT e.id, ?, e.merchant_id, e.mode, e.created_at
           FROM unnest(?::text[], ?::text[], ?::text[], ?::timestamptz[]) AS e(id, merchant_id, mode, created_at)
          WHERE NOT EXISTS (SELECT 1 FROM event_deliveries d
                             WHERE d.event_id = e.id AND d.endpoint_id = ? AND d.error IS NULL
                               -- The chunk range: planned over its days only, not every day.
                               AND d.event_id > ?${range.length > 1 ? ' AND d.event_id <= ?' : ''})
         ON CONFLICT DO NOTHING`,
        [
          found.endpoint_id,
          found.event_ids,
          found.merchant_ids,
          found.modes,
          found.created_ats,
          found.endpoint_id,
          ...range,
        ],
      );
      inserted = result.rowCount ?? 0;
    }
    if (found.delivered_ids) {
      await trx.raw(`DELETE FROM webhook_undelivered WHERE endpoint_id = ? AND event_id = ANY(?::text[])`, [
        found.endpoint_id,
        found.delivered_ids,
      ]);
    }
    return inserted;
  });
}

/** The whole pass, chunk by chunk along event_deliveries' key; returns the pairs it listed. */
export async function backfillUndelivered(knex: Knex, chunkRows = CHUNK_ROWS): Promise<number> {
  let inserted = 0;
  let after = '';
  for (;;) {
    const { rows: ends } = await knex.raw(
      `SELECT event_id FROM event_deliveries WHERE event_id > ? ORDER BY event_id OFFSET ? LIMIT 1`,
      [after, chunkRows - 1],
    );
    const upTo: string | null = ends[0]?.event_id ?? null;
    const range = upTo === null ? [after] : [after, upTo];
    const { rows } = await knex.raw(chunkSql(upTo !== null), [...range, ...range]);
    for (const found of rows as Found[]) inserted += await applyToEndpoint(knex, found, range);
    if (upTo === null) return inserted;
    after = upTo;
  }
}

/** Fills a table the previous release does not read (a backfill: not allowed today). */
export const phase = 'expand';

export async function up(knex: Knex): Promise<void> {
  await backfillUndelivered(knex);
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
