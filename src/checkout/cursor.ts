import { decodeCursor, encodeCursor } from '../http/cursor';
import { ApiError } from '../http/errors';

const isIsoTime = (value: string) => !Number.isNaN(Date.parse(value)) && new Date(value).toISOString() === value;

/** Checkout lists page on (created_at, id); the cursor carries the last row's pair. */
export function checkoutCursor(list: string, raw: string | undefined): { createdAt: string; id: string } | undefined {
  if (raw === undefined || raw === '') return undefined;
  const invalid = () =>
    ApiError.validation('cursor is not a cursor from this list.', [{ field: 'cursor', issue: 'invalid' }]);
  const [createdAt, id] = decodeCursor(list, raw, invalid);
  // Only what nextCheckoutCursor writes: a tampered time would otherwise reach Postgres as a 500.
  if (typeof createdAt !== 'string' || typeof id !== 'string' || !isIsoTime(createdAt)) throw invalid();
  return { createdAt, id };
}

export function nextCheckoutCursor(
  list: string,
  hasMore: boolean,
  last: { created_at: Date; id: string } | undefined,
): string | null {
  return hasMore && last ? encodeCursor(list, [new Date(last.created_at).toISOString(), last.id]) : null;
}
