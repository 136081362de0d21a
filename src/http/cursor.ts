import { isStorableText } from '../lib/text';
import { ApiError } from './errors';

/** Cursor format version; a cursor of another version (or list) is refused. */
const CURSOR_VERSION = 2;

/**
 * Opaque keyset cursors: base64url of `{v, l, k}` (version, list name, the last row's sort key).
 * Anything that does not decode to a cursor of the same list is a 400 on field `cursor`.
 */
export function encodeCursor(list: string, key: Array<string | number>): string {
  return Buffer.from(JSON.stringify({ v: CURSOR_VERSION, l: list, k: key })).toString('base64url');
}

export function decodeCursor(list: string, cursor: string, invalid: () => ApiError): Array<string | number> {
  let doc: unknown;
  try {
    if (!/^[A-Za-z0-9_-]+$/.test(cursor)) throw new Error('not base64url');
    doc = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalid();
  }
  const d = doc as { v?: unknown; l?: unknown; k?: unknown };
  // A string Postgres cannot hold (U+0000) could match no row; refused here, it never reaches a query.
  const keyOk =
    Array.isArray(d?.k) &&
    d.k.length > 0 &&
    d.k.every((x) => (typeof x === 'string' && isStorableText(x)) || typeof x === 'number');
  if (d?.v !== CURSOR_VERSION || d.l !== list || !keyOk) throw invalid();
  return d.k as Array<string | number>;
}
