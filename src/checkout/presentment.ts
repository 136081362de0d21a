import type { MerchantMethod } from './payment-methods';
import { minorUnitExponents } from './money';

const RATE_DECIMALS = 10;
const pow10 = (n: number) => 10n ** BigInt(n);

/**
 * `amount` (minor units of `from`) in minor units of `to` at `rate` (units of `to` per unit of
 * `from`), rounded half up, in bigint throughout: the rate is taken to its ten recorded decimals
 * as an integer.
 */
export function convertAmountExact(amount: number | bigint, from: string, to: string, rate: number): bigint {
  const scaledRate = BigInt(rate.toFixed(RATE_DECIMALS).replace('.', ''));
  const shift = minorUnitExponents[to] - minorUnitExponents[from];
  const numerator = BigInt(amount) * scaledRate * pow10(Math.max(0, shift));
  const denominator = pow10(RATE_DECIMALS) * pow10(Math.max(0, -shift));
  return (2n * numerator + denominator) / (2n * denominator);
}

/** {@link convertAmountExact} as a number; null when it is beyond 2^53 − 1, which no JSON number holds exactly. */
export function convertAmount(amount: number, from: string, to: string, rate: number): number | null {
  const exact = convertAmountExact(amount, from, to, rate);
  return exact <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(exact) : null;
}

/** What a method asks the shopper to pay. */
export interface Presented {
  amount: number;
  currency: string;
  /** Session currency → presented currency; null when nothing was converted. */
  fxRate: number | null;
}

/** The part of a session that decides what is presented. */
export interface PricedSession {
  amount: number;
  currency: string;
  presentment: { currency: string; fx_rate: number } | null;
}

/**
 * What `method` presents for `session`: the session's presentment currency at its fixed rate when
 * the method takes it; else the session currency; else the first currency the method takes for
 * which the operator's table has a rate from the session currency (`rates`: to-currency → rate).
 * Null when the method takes none of these (a conversion beyond 2^53 − 1 counts as not taken).
 */
export function presentFor(
  session: PricedSession,
  method: Pick<MerchantMethod, 'currencies'>,
  rates: ReadonlyMap<string, number>,
): Presented | null {
  const p = session.presentment;
  if (p && p.currency !== session.currency && method.currencies.includes(p.currency)) {
    const amount = convertAmount(session.amount, session.currency, p.currency, p.fx_rate);
    if (amount !== null) return { amount, currency: p.currency, fxRate: p.fx_rate };
  }
  if (method.currencies.includes(session.currency)) {
    return { amount: session.amount, currency: session.currency, fxRate: null };
  }
  for (const currency of method.currencies) {
    const rate = rates.get(currency);
    const amount = rate === undefined ? null : convertAmount(session.amount, session.currency, currency, rate);
    if (amount !== null) return { amount, currency, fxRate: rate! };
  }
  return null;
}

/** Why a method offered on a session cannot be used, in the order checked. */
export type UnavailableReason =
  'vendor_not_configured' | 'not_enabled' | 'currency_not_supported' | 'amount_out_of_range';

export interface MethodAvailability {
  method: MerchantMethod;
  available: boolean;
  unavailableReason: UnavailableReason | null;
  presented: Presented | null;
}

/** Whether `method` can take `session`'s payment here, and what it would present. */
export function methodAvailability(
  session: PricedSession,
  method: MerchantMethod,
  rates: ReadonlyMap<string, number>,
): MethodAvailability {
  const presented = presentFor(session, method, rates);
  const unavailable = (reason: UnavailableReason): MethodAvailability => ({
    method,
    available: false,
    unavailableReason: reason,
    presented,
  });
  if (!method.completesHere) return unavailable('vendor_not_configured');
  if (!method.enabled) return unavailable('not_enabled');
  if (!presented) return unavailable('currency_not_supported');
  const limits = method.limits[presented.currency];
  if (limits && (presented.amount < (limits.min ?? -Infinity) || presented.amount > (limits.max ?? Infinity))) {
    return unavailable('amount_out_of_range');
  }
  return { method, available: true, unavailableReason: null, presented };
}
