import type { Db } from '../../db/knex';
import { MerchantMethod, methodsForMode } from '../payment-methods';
import { MethodAvailability, methodAvailability } from '../presentment';
import { paymentMethodOut } from '../serializers';
import type { Address, SessionRow } from '../sessions/session-row';

/** What the hosted page shows of the merchant. */
export interface MerchantDisplay {
  display_name: string;
  logo_url: string | null;
  accent: string | null;
}

/** The merchant's display, its methods in the session's mode and the FX rates from the session currency. */
export interface PublicContext {
  merchant: MerchantDisplay;
  methods: MerchantMethod[];
  rates: Map<string, number>;
}

/** Reads a session's public context in one round trip. */
export async function publicContext(db: Db, session: SessionRow): Promise<PublicContext> {
  const { rows } = await db.raw(
    `SELECT m.display_name, m.logo_url, m.accent,
            (SELECT coalesce(json_object_agg(code, enabled), '{}') FROM merchant_methods
              WHERE merchant_id = m.id AND mode = ?) AS methods,
            (SELECT coalesce(json_object_agg(to_currency, rate), '{}') FROM fx_rates WHERE from_currency = ?) AS rates
       FROM merchants m WHERE m.id = ?`,
    [session.mode, session.currency, session.merchant_id],
  );
  const row: MerchantDisplay & { methods: Record<string, boolean>; rates: Record<string, string | number> } = rows[0];
  return {
    merchant: { display_name: row.display_name, logo_url: row.logo_url, accent: row.accent },
    methods: methodsForMode(session.mode, new Map(Object.entries(row.methods))),
    rates: new Map(Object.entries(row.rates).map(([to, rate]) => [to, Number(rate)])),
  };
}

/** The session's offered methods, in the merchant's order, each with its availability and presented price. */
export function offeredMethods(session: SessionRow, ctx: PublicContext): MethodAvailability[] {
  return session.payment_method_types.flatMap((code) => {
    const method = ctx.methods.find((m) => m.code === code);
    return method ? [methodAvailability(session, method, ctx.rates)] : [];
  });
}

/** A stored or absent address as the API shows it. */
export function addressOut(a: Address | null | undefined): Address | null {
  if (!a) return null;
  return {
    governorate: a.governorate,
    city: a.city,
    line: a.line,
    landmark: a.landmark ?? null,
    country: a.country,
    geo: a.geo ? { lat: a.geo.lat, lng: a.geo.lng } : null,
  };
}

/**
 * The verified customer's profile. Customers are not served yet, so it holds what this session
 * knows of them (never anything from another session); instruments stay empty.
 */
export function profileOut(session: SessionRow) {
  const address = addressOut(session.customer.address);
  return { name: session.customer.name, addresses: address ? [address] : [], instruments: [] as unknown[] };
}

/** The public session (hosted page view): never metadata; `profile` only for a valid customer token. */
export function publicSessionOut(session: SessionRow, ctx: PublicContext, withProfile: boolean) {
  return {
    code: session.code,
    status: session.status,
    payment_status: session.payment_status,
    reference_id: session.reference_id,
    amount: session.amount,
    currency: session.currency,
    line_items: session.line_items.map((i) => ({
      label: i.label,
      amount: i.amount,
      quantity: i.quantity,
      type: i.type,
    })),
    merchant: ctx.merchant,
    methods: offeredMethods(session, ctx).map((a) => ({
      ...paymentMethodOut(a.method),
      available: a.available,
      unavailable_reason: a.unavailableReason,
      presented_amount: a.presented?.amount ?? null,
      presented_currency: a.presented?.currency ?? null,
    })),
    customer: {
      phone: session.customer.phone,
      phone_verified: session.customer.phone_verified === true,
      name: session.customer.name,
      address: addressOut(session.customer.address),
    },
    collect: {
      phone: session.collect.phone,
      name: session.collect.name,
      shipping_address: session.collect.shipping_address,
    },
    locale: session.locale,
    expires_at: new Date(session.expires_at).toISOString(),
    cancel_url: session.cancel_url,
    livemode: session.mode === 'live',
    ...(withProfile ? { profile: profileOut(session) } : {}),
  };
}
