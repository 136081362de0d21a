/** RFC 3339 date-time with a zone (Z or ±hh:mm); a `+` sent unencoded arrives as a space and fails. */
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|([+-])(\d{2}):(\d{2}))$/;

/** The instant `value` names, or null when it is not a real RFC 3339 date-time with a zone. */
export function parseRfc3339(value: string): Date | null {
  const m = RFC3339.exec(value);
  if (!m) return null;
  const [, y, mo, d, h, mi, s, , , , oh, om] = m;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth) return null;
  if (Number(h) > 23 || Number(mi) > 59 || Number(s) > 60) return null;
  if (oh !== undefined && (Number(oh) > 23 || Number(om) > 59)) return null;
  const date = new Date(value.replace('t', 'T').replace('z', 'Z').replace(/:60(\.|Z|[+-]|$)/, ':59$1'));
  return Number.isNaN(date.getTime()) ? null : date;
}
