import { ApiError } from '../http/errors';
import { isObject } from './rows';

export const BULK_PRODUCT_ROWS = 50;
export const BULK_INVENTORY_ROWS = 500;

/** Page sizes of the list routes: `limit` defaults and caps. */
export const PRODUCTS_PAGE = { defaultLimit: 20, maxLimit: 100 } as const;
export const ORDERS_PAGE = { defaultLimit: 50, maxLimit: 200 } as const;

/**
 * The bulk routes' only top-level check: `items` is an array of 1 to `max` rows (missing, not an
 * array or empty is issue `missing`; over the cap is `too_many`). Everything else is per row.
 */
export function bulkItems(body: unknown, max: number): unknown[] {
  const items = isObject(body) ? body.items : undefined;
  if (!Array.isArray(items) || items.length === 0) {
    throw ApiError.validation('items must be an array of 1 to ' + max + ' rows.', [
      { field: 'items', issue: 'missing' },
    ]);
  }
  if (items.length > max) {
    throw ApiError.validation(`items holds ${items.length} rows; the limit is ${max}.`, [
      { field: 'items', issue: 'too_many' },
    ]);
  }
  return items;
}
