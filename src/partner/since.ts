/** RFC 3339 date-time with a zone (Z or ±hh:mm); a `+` sent unencoded arrives as a space and fails. */
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;

const isLeapYear = (y: number) => (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/**
 * The instant `value` names, or null when it is not a real RFC 3339 date-time with a zone.
 * Stored times have millisecond precision, so a finer fraction is rounded up: `t >= since` then
 * holds for a stored `t` exactly when it holds for the precise instant. A leap second (`:60`)
 * counts as the last millisecond of its minute.
 */
export function parseRfc3339(value: string): Date | null {
  const m = RFC3339.exec(value);
  if (!m) return null;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number);
  const fraction = m[7] ?? '';
  const daysInMonth = month === 2 && isLeapYear(year) ? 29 : DAYS_IN_MONTH[month - 1];
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth) return null;
  if (hour > 23 || minute > 59 || second > 60) return null;
  const offsetMinutes = m[8] === undefined ? 0 : (m[8] === '-' ? -1 : 1) * (Number(m[9]) * 60 + Number(m[10]));
  if (m[8] !== undefined && (Number(m[9]) > 23 || Number(m[10]) > 59)) return null;

  let ms = Number(fraction.slice(0, 3).padEnd(3, '0'));
  if (/[1-9]/.test(fraction.slice(3))) ms += 1;
  if (second === 60) ms = 999;
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day); // not Date.UTC, which maps years 0-99 to 1900-1999
  date.setUTCHours(hour, minute, Math.min(second, 59), ms);
  return new Date(date.getTime() - offsetMinutes * 60_000);
}
