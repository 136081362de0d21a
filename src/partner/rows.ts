import { isStorableText } from '../lib/text';
/** One entry of a bulk route's `results`. */
export interface RowResult {
  external_sku: string | null;
  status: 'accepted' | 'rejected';
  product_id?: string;
  error?: { code: string; message: string };
}

export const accepted = (sku: string, extra: { product_id?: string } = {}): RowResult => ({
  external_sku: sku,
  status: 'accepted',
  ...extra,
});

export const rejected = (sku: string | null, code: string, message: string): RowResult => ({
  external_sku: sku,
  status: 'rejected',
  error: { code, message },
});

export const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** The row's SKU when it is a non-blank string Postgres can hold, else null (the result then shows null). */
export const rowSku = (row: Record<string, unknown>): string | null =>
  typeof row.external_sku === 'string' && row.external_sku.trim() !== '' && isStorableText(row.external_sku)
    ? row.external_sku
    : null;

/** The message of a row refused by `rowSku`. */
export const SKU_REQUIRED = 'external_sku is required: a non-blank string of valid Unicode without U+0000.';

export const isWholeNumber = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
