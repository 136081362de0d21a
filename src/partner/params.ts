import type { ParsedUrlQuery } from 'node:querystring';
import { decodeCursor } from '../http/cursor';
import { ApiError } from '../http/errors';

/** `limit` the Partner way: a non-positive-integer value is ignored (default), a larger one capped. */
export function partnerLimit(raw: unknown, defaultLimit: number, max: number): number {
  if (typeof raw !== 'string' || !/^[0-9]+$/.test(raw)) return defaultLimit;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n <= 0) return defaultLimit;
  return Math.min(n, max);
}

const invalidCursor = () => ApiError.validation('cursor is not a cursor from this list.', [{ field: 'cursor', issue: 'invalid' }]);

/** The decoded keyset of `cursor` for `list`, or null when absent or empty. */
export function partnerCursor(query: ParsedUrlQuery, list: string): Array<string | number> | null {
  const raw = query.cursor;
  if (raw === undefined || raw === '') return null;
  if (typeof raw !== 'string') throw invalidCursor();
  return decodeCursor(list, raw, invalidCursor);
}
