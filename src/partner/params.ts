import { isStorableText } from '../lib/text';
import type { ParsedUrlQuery } from 'node:querystring';
import { decodeCursor, encodeCursor } from '../http/cursor';
import { ApiError } from '../http/errors';
import type { OrdersKey } from './orders';
import { parseRfc3339 } from './since';

/** `limit` the Partner way: a non-positive-integer value is ignored (default), a larger one capped. */
export function partnerLimit(raw: unknown, page: { defaultLimit: number; maxLimit: number }): number {
  if (typeof raw !== 'string' || !/^[0-9]+$/.test(raw)) return page.defaultLimit;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n <= 0) return page.defaultLimit;
  return Math.min(n, page.maxLimit);
}

const invalidCursor = () =>
  ApiError.validation('cursor is not a cursor from this list.', [{ field: 'cursor', issue: 'invalid' }]);

/** The decoded keyset of `cursor` for `list`, or null when absent or empty. */
function partnerCursor(query: ParsedUrlQuery, list: string): Array<string | number> | null {
  const raw = query.cursor;
  if (raw === undefined || raw === '') return null;
  if (typeof raw !== 'string') throw invalidCursor();
  return decodeCursor(list, raw, invalidCursor);
}

const isId = (v: unknown): v is string => typeof v === 'string' && v !== '' && isStorableText(v);

/** `GET /products` pages by product id: the last id of the previous page, or null for the first page. */
export function productsCursor(query: ParsedUrlQuery): string | null {
  const key = partnerCursor(query, 'products');
  if (key === null) return null;
  if (key.length !== 1 || !isId(key[0])) throw invalidCursor();
  return key[0];
}

export const encodeProductsCursor = (lastProductId: string) => encodeCursor('products', [lastProductId]);

/** `GET /orders` pages by (settlement created_at, order id): the previous page's last key, or null. */
export function ordersCursor(query: ParsedUrlQuery): OrdersKey | null {
  const key = partnerCursor(query, 'orders');
  if (key === null) return null;
  const [placedAt, id] = key;
  const at = typeof placedAt === 'string' ? parseRfc3339(placedAt) : null;
  if (key.length !== 2 || at === null || !isId(id)) throw invalidCursor();
  return { placedAt: at, id };
}

export const encodeOrdersCursor = (last: OrdersKey) => encodeCursor('orders', [last.placedAt.toISOString(), last.id]);

const invalidSince = () =>
  ApiError.validation('since must be an RFC 3339 date-time with a zone, e.g. 2026-11-21T10:00:00Z.', [
    { field: 'since', issue: 'invalid' },
  ]);

/** `since`: absent or empty is no bound; sent twice, or not an RFC 3339 date-time with a zone, is a 400. */
export function sinceParam(query: ParsedUrlQuery): Date | undefined {
  const raw = query.since;
  if (raw === undefined || raw === '') return undefined;
  if (typeof raw !== 'string') throw invalidSince();
  const since = parseRfc3339(raw);
  if (since === null) throw invalidSince();
  return since;
}

/** `status` on `GET /products`: any string (an unknown one matches nothing); absent or empty is no filter. */
export function statusParam(query: ParsedUrlQuery): string | undefined {
  const raw = query.status;
  if (raw === undefined || raw === '') return undefined;
  if (typeof raw !== 'string') {
    throw ApiError.validation('status may be sent once.', [{ field: 'status', issue: 'invalid' }]);
  }
  return raw;
}
