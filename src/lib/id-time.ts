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
