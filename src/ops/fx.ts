import type { Db } from '../db/knex';
import { iso } from '../lib/time';
import { OpsError } from './errors';

const CURRENCY_PATTERN = /^[A-Z]{3}$/;
const RATE_PATTERN = /^\d{1,10}(\.\d{1,10})?$/;

/** Normalises an ISO 4217 code to upper case; else `invalid_<field>`. */
function currency(value: string, field: string): string {
  const code = value.trim().toUpperCase();
  if (!CURRENCY_PATTERN.test(code))
    throw new OpsError(`invalid_${field}`, `${field} must be a three-letter currency code`);
  return code;
}

/** Sets the operator-managed rate: 1 unit of `from` is `rate` units of `to` (upsert). */
export async function setFxRate(
  db: Db,
  input: { from: string; to: string; rate: string | number },
): Promise<{ from: string; to: string; rate: number; updated_at: string }> {
  const from = currency(input.from, 'from');
  const to = currency(input.to, 'to');
  if (from === to) throw new OpsError('invalid_to', 'from and to must differ');
  const rate = String(input.rate);
  if (!RATE_PATTERN.test(rate) || Number(rate) <= 0) {
    throw new OpsError('invalid_rate', 'rate must be a positive decimal number (up to 10 decimal places)');
  }
  const [row] = await db('fx_rates')
    .insert({ from_currency: from, to_currency: to, rate })
    .onConflict(['from_currency', 'to_currency'])
    .merge({ rate, updated_at: db.fn.now() })
    .returning(['from_currency', 'to_currency', 'rate', 'updated_at']);
  return { from: row.from_currency, to: row.to_currency, rate: Number(row.rate), updated_at: iso(row.updated_at) };
}
