import { OpsError } from './errors';

/** `value` trimmed, or `invalid_<field>` when it is blank. */
export function nonBlank(value: string, field: string): string {
  const trimmed = value.trim();
  if (!trimmed) throw new OpsError(`invalid_${field}`, `${field} must not be blank`);
  return trimmed;
}

/** An amount of money: a whole number of IQD, 0 or more; else `invalid_<field>`. */
export function money(value: number, field: string): number {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new OpsError(`invalid_${field}`, `${field} must be a whole number 0 or more`);
  }
  return value;
}

/** A whole number in `[min, max]`; else `invalid_<field>`. */
export function intInRange(value: number, field: string, min: number, max: number): number {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new OpsError(`invalid_${field}`, `${field} must be a whole number from ${min} to ${max}`);
  }
  return value;
}
