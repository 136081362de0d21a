import type { Knex } from 'knex';
import { decodeCursor, encodeCursor } from '../http/cursor';
import { ApiError } from '../http/errors';

const isIsoTime = (value: string) => !Number.isNaN(Date.parse(value)) && new Date(value).toISOString() === value;

/** Where a page of a Checkout list starts: after the row with this (created_at, id). */
export interface Keyset {
  createdAt: string;
  id: string;
}

export interface Page<T> {
  rows: T[];
  hasMore: boolean;
}

/** Checkout lists page on (created_at, id); the cursor carries the last row's pair. */
export function checkoutCursor(list: string, raw: string | undefined): Keyset | undefined {
  if (raw === undefined || raw === '') return undefined;
  const invalid = () =>
    ApiError.validation('cursor is not a cursor from this list.', [{ field: 'cursor', issue: 'invalid' }]);
  const [createdAt, id] = decodeCursor(list, raw, invalid);
  // Only what nextCheckoutCursor writes: a tampered time would otherwise reach Postgres as a 500.
  if (typeof createdAt !== 'string' || typeof id !== 'string' || !isIsoTime(createdAt)) throw invalid();
  return { createdAt, id };
}

/**
 * Runs `query` newest first on (created_at, id) (or oldest first for `asc`), starting after
 * `after`, and fetches one row beyond `limit` to learn whether more exist: every Checkout list
 * pages this way. `keys` names the two columns when they are not the query's own `created_at`, `id`.
 */
export async function newestFirst<T>(
  query: Knex.QueryBuilder,
  after: Keyset | undefined,
  limit: number,
  order: 'desc' | 'asc' = 'desc',
  keys: readonly [string, string] = ['created_at', 'id'],
): Promise<Page<T>> {
  const [time, id] = keys;
  query
    .orderBy([
      { column: time, order },
      { column: id, order },
    ])
    .limit(limit + 1);
  const past = order === 'desc' ? '<' : '>';
  // The bound on the time alone says the same again in a form Postgres prunes partitions by
  // (the event log's days); a row comparison it does not.
  if (after) {
    query.andWhereRaw(`?? ${past}= ?::timestamptz AND (??, ??) ${past} (?::timestamptz, ?)`, [
      time,
      after.createdAt,
      time,
      id,
      after.createdAt,
      after.id,
    ]);
  }
  const rows: T[] = await query;
  return { rows: rows.slice(0, limit), hasMore: rows.length > limit };
}

/** The Checkout list envelope: `data`, and `next_cursor` (null on the last page). */
export function listOut<T extends { created_at: Date; id: string }>(
  list: string,
  page: Page<T>,
  out: (row: T) => unknown,
) {
  const last = page.rows[page.rows.length - 1];
  return {
    data: page.rows.map(out),
    next_cursor: page.hasMore && last ? encodeCursor(list, [new Date(last.created_at).toISOString(), last.id]) : null,
  };
}
