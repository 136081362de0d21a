/** U+0000 or a lone UTF-16 surrogate: Postgres text and jsonb hold neither. */
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * True when Postgres can hold `s`. Input that fails is refused (it can match nothing stored), so
 * it never reaches a query or a stored idempotent response as a 500.
 */
export const isStorableText = (s: string): boolean => !UNSTORABLE.test(s);

/** The validation issue of text Postgres cannot hold. */
export const UNSTORABLE_ISSUE = 'Must be valid Unicode text without U+0000';

/** `s` with each unstorable character replaced by U+FFFD, for echoing input (keys in details). */
export function storableText(s: string): string {
  return s.replace(new RegExp(UNSTORABLE.source, 'g'), '\ufffd');
}
