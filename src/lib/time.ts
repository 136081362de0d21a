/** A timestamp column (Date from pg) as ISO 8601 UTC with milliseconds; null (or absent) stays null. */
export function iso(value: Date): string;
export function iso(value: Date | null | undefined): string | null;
export function iso(value: Date | null | undefined): string | null {
  return value == null ? null : new Date(value).toISOString();
}
