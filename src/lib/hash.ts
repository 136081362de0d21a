import { createHash, timingSafeEqual } from 'node:crypto';

/** SHA-256 of `input` as lower-case hex. */
export function sha256Hex(input: string | Buffer): string {
  return createHash('sha256').update(input).digest('hex');
}

/** Compares two strings in time independent of where they differ (lengths are compared first). */
export function constantTimeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a);
  const bb = Buffer.from(b);
  if (ab.length !== bb.length) return false;
  return timingSafeEqual(ab, bb);
}

/** JSON with object keys sorted at every depth, so JSON-equal documents serialise identically. */
export function canonicalJson(value: unknown): string {
  // Most documents (parsed JSON whose keys already come sorted) serialise as they are, at native speed.
  if (isCanonical(value)) return JSON.stringify(value) ?? 'null';
  return sortedJson(value);
}

function sortedJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(sortedJson).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${sortedJson(v)}`).join(',')}}`;
}

/**
 * True when JSON.stringify(value) is already what sortedJson gives: every object is a plain one
 * whose keys come in sorted order with no undefined value (so no integer-like keys out of string
 * order, no toJSON). Walked without recursion; deeper than MAX_DEPTH (or cyclic) is left to sortedJson.
 */
function isCanonical(value: unknown): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (node === null || typeof node !== 'object') continue;
    if (depth > MAX_DEPTH) return false;
    if (Array.isArray(node)) {
      for (const item of node) stack.push([item, depth + 1]);
      continue;
    }
    const proto = Object.getPrototypeOf(node);
    if (proto !== Object.prototype && proto !== null) return false;
    let previous: string | undefined;
    for (const key in node) {
      if (!Object.hasOwn(node, key)) return false;
      const child = (node as Record<string, unknown>)[key];
      if (child === undefined || (previous !== undefined && previous >= key)) return false;
      previous = key;
      stack.push([child, depth + 1]);
    }
  }
  return true;
}

const MAX_DEPTH = 64;
