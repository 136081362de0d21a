import { iso } from '../../lib/time';
import type { KeyMode } from '../../keys/keys';
import type { LineItem } from '../money';

/** A shipping address as stored and shown. */
export interface Address {
  governorate: string;
  city: string;
  line: string;
  landmark: string | null;
  country: string;
  geo: { lat: number | null; lng: number | null } | null;
}

/** A `checkout_sessions` row as knex returns it. */
export interface SessionRow {
  id: string;
  merchant_id: string;
  mode: KeyMode;
  code: string;
  status: 'open' | 'processing' | 'completed' | 'expired' | 'canceled';
  payment_status: string;
  reference_id: string;
  amount: number;
  currency: string;
  line_items: LineItem[];
  price_key: string;
  payment_method_types: string[];
  /** `phone_verified` is set once the shopper proved the phone by SMS code on the hosted page. */
  customer: { phone: string | null; name: string | null; address: Address | null; phone_verified?: boolean };
  collect: { phone: string; name: string; shipping_address: string };
  presentment: { currency: string; fx_rate: number } | null;
  payment: Record<string, unknown> | null;
  refunded_amount: number;
  locale: string;
  success_url: string;
  cancel_url: string | null;
  metadata: Record<string, string>;
  expires_at: Date;
  completed_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** The Checkout session object; `publicBaseUrl` makes the hosted page `url`. */
export function sessionOut(row: SessionRow, publicBaseUrl: string) {
  return {
    id: row.id,
    object: 'checkout.session',
    code: row.code,
    url: `${publicBaseUrl.replace(/\/$/, '')}/c/${row.code}`,
    livemode: row.mode === 'live',
    status: row.status,
    payment_status: row.payment_status,
    reference_id: row.reference_id,
    amount: row.amount,
    currency: row.currency,
    line_items: row.line_items.map((i) => ({ label: i.label, amount: i.amount, quantity: i.quantity, type: i.type })),
    payment_method_types: row.payment_method_types,
    customer: { id: null, phone: row.customer.phone, name: row.customer.name, address: row.customer.address ?? null },
    collect: { phone: row.collect.phone, name: row.collect.name, shipping_address: row.collect.shipping_address },
    presentment: row.presentment && { currency: row.presentment.currency, fx_rate: row.presentment.fx_rate },
    payment: row.payment,
    refunded_amount: row.refunded_amount,
    locale: row.locale,
    success_url: row.success_url,
    cancel_url: row.cancel_url,
    expires_at: iso(row.expires_at),
    completed_at: iso(row.completed_at),
    metadata: row.metadata,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}
export type SessionOut = ReturnType<typeof sessionOut>;
