/** The time part of our ids, free of Node built-ins so the workflow bundle may import it. */

/** Lower-case Crockford base32: the alphabet of id bodies. */
export const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';

/** `value` as `digits` characters of Crockford base32, most significant first. */
export function base32(value: number, digits: number): string {
  let out = '';
  for (let i = 0; i < digits; i++) {
    out = CROCKFORD[value % 32] + out;
    value = Math.floor(value / 32);
  }
  return out;
}

/**
 * A condition that `column` (an event id) lies within the ids' range in each mode (live ids sort
 * before `evt_test_`), with its four bindings. Beside an equality on the id of a partitioned table
 * (event_deliveries, by event id and day), it lets the planner prune to the days of those ids,
 * which a join on the id alone does only when it runs, after planning every day.
 */
export function eventIdRanges(column: string, ids: readonly string[]): { sql: string; bindings: string[] } {
  const range = (some: string[]) => (some.length === 0 ? ['~', ''] : [some[0], some[some.length - 1]]);
  const sorted = [...ids].sort();
  return {
    sql: `((${column} >= ? AND ${column} <= ?) OR (${column} >= ? AND ${column} <= ?))`,
    bindings: [
      ...range(sorted.filter((id) => !id.startsWith('evt_test_'))),
      ...range(sorted.filter((id) => id.startsWith('evt_test_'))),
    ],
  };
}
