import { iso } from '../lib/time';

/** `YYYY-MM-DD` (a date input's value) as the start of that UTC day; `undefined` for none, null when not a date. */
export function dayOf(value: string): Date | undefined | null {
  if (value === '') return undefined;
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value)) return null;
  const day = new Date(`${value}T00:00:00.000Z`);
  return Number.isNaN(day.getTime()) || iso(day).slice(0, 10) !== value ? null : day;
}

/** The day after `day` starts: a `to` day taken whole. */
export const dayAfter = (day: Date): Date => new Date(day.getTime() + 86_400_000);
