import type { ParsedUrlQuery } from 'node:querystring';
import { z } from 'zod';
import { encodeCursor } from '../http/cursor';
import { ApiError, ErrorDetail } from '../http/errors';
import {
  ADJUSTMENT_FIELD_ORDER,
  AdjustmentIn,
  OrdersKey,
  adjustmentIn,
  bulkBody,
  orderListQuery,
  productListQuery,
} from './schemas';
import { isObject } from './rows';

type Issue = z.core.$ZodIssue;

/** A Partner field path: `items[3].external_sku`. */
const fieldOf = (path: ReadonlyArray<PropertyKey>) =>
  path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('');

/**
 * Partner details: one per issue, its message being the stable token (`missing`, `invalid`, …),
 * listed in the body's field order (`order` ranks the keys; array positions in index order).
 */
function partnerDetails(issues: Issue[], order: readonly string[] = []): ErrorDetail[] {
  const rank = (k: PropertyKey) => {
    const i = order.indexOf(String(k));
    return i === -1 ? order.length : i;
  };
  const compare = (a: Issue, b: Issue) => {
    for (let i = 0; i < Math.min(a.path.length, b.path.length); i++) {
      const [x, y] = [a.path[i], b.path[i]];
      const d = typeof x === 'number' && typeof y === 'number' ? x - y : rank(x) - rank(y);
      if (d !== 0) return d;
    }
    return a.path.length - b.path.length;
  };
  return [...issues].sort(compare).map((issue) => ({ field: fieldOf(issue.path), issue: issue.message }));
}

/** Parses `value` with `schema`, or throws `400 validation_error` with Partner details and `message(details)`. */
function parse<S extends z.ZodType>(
  schema: S,
  value: unknown,
  message: (details: ErrorDetail[]) => string,
  extra: (issues: Issue[]) => Issue[] = (issues) => issues,
  order?: readonly string[],
): z.output<S> {
  const result = schema.safeParse(value);
  const issues = extra(result.success ? [] : result.error.issues);
  if (issues.length === 0 && result.success) return result.data;
  const details = partnerDetails(issues, order);
  throw ApiError.validation(message(details), details);
}

const QUERY_MESSAGES: Record<string, string> = {
  status: 'status may be sent once.',
  cursor: 'cursor is not a cursor from this list.',
  since: 'since must be an RFC 3339 date-time with a zone, e.g. 2026-11-21T10:00:00Z.',
};
const queryMessage = (details: ErrorDetail[]) => details.map((d) => QUERY_MESSAGES[d.field!]).join(' ');

/** `GET /products` query: status, the products cursor (last product id) and limit. */
export const readProductListQuery = (query: ParsedUrlQuery) => parse(productListQuery, query, queryMessage);

/** `GET /orders` query: since, the orders cursor (last settlement created_at and order id) and limit. */
export const readOrderListQuery = (query: ParsedUrlQuery) => parse(orderListQuery, query, queryMessage);

export const encodeProductsCursor = (lastProductId: string) => encodeCursor('products', [lastProductId]);
export const encodeOrdersCursor = (last: OrdersKey) => encodeCursor('orders', [last.placedAt.toISOString(), last.id]);

const bulkItemsSchemas = new Map<number, ReturnType<typeof bulkBody<z.ZodUnknown>>>();

/**
 * The bulk routes' only top-level check: `items` is an array of 1 to `max` rows (missing, not an
 * array or empty is issue `missing`; over the cap is `too_many`). Everything else is per row.
 */
export function readBulkItems(body: unknown, max: number): unknown[] {
  const b = isObject(body) ? body : {};
  let schema = bulkItemsSchemas.get(max);
  // Rows are read one by one by the route's service (a bad row is a rejected result), so any row passes here.
  if (!schema) bulkItemsSchemas.set(max, (schema = bulkBody(z.unknown(), max)));
  return parse(schema, b, ([detail]) =>
    detail.issue === 'too_many'
      ? `items holds ${(b.items as unknown[]).length} rows; the limit is ${max}.`
      : `items must be an array of 1 to ${max} rows.`,
  ).items;
}

/**
 * `POST /inventory/adjustments` body, every problem listed at once in field order. `unit_value`
 * with a category other than `external_sale` is `not_applicable` (whatever its value); a body
 * that is not an object is read as `{}`.
 */
export function readAdjustment(body: unknown): AdjustmentIn {
  const b = isObject(body) ? body : {};
  const notApplicable = (b.unit_value ?? null) !== null && b.category !== 'external_sale';
  const crossField = (issues: Issue[]): Issue[] =>
    notApplicable
      ? [
          ...issues.filter((i) => i.path[0] !== 'unit_value'),
          { code: 'custom', path: ['unit_value'], message: 'not_applicable', input: b.unit_value },
        ]
      : issues;
  return parse(adjustmentIn, b, () => 'The adjustment request is invalid.', crossField, ADJUSTMENT_FIELD_ORDER);
}
