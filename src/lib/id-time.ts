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

/** The least id newId(`prefix`, `mode`) can make at `ms` or later (as SQL's event_log_id_bound). */
export function idBound(prefix: string, mode: 'live' | 'test' | undefined, ms: number): string {
  return `${prefix}_${mode === 'test' ? 'test_' : ''}${base32(ms, 10)}`;
}
