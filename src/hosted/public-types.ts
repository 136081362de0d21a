import type { Address } from '../checkout/sessions/session-row';
import type { MerchantBrand } from './templates/layout';

/** The shapes of the public routes' answers the hosted pages read (spec: "Public session", attempt poll). */

export type { Address };

export type Collect = 'required' | 'optional' | 'none';

export interface PublicMethod {
  code: string;
  display_name: { ar: string; ku: string; en: string };
  flow: string;
  available: boolean;
  unavailable_reason: string | null;
  presented_amount: number | null;
  presented_currency: string | null;
}

export interface PublicSession {
  code: string;
  status: string;
  payment_status: string;
  reference_id: string;
  amount: number;
  currency: string;
  line_items: Array<{ label: string; amount: number; quantity: number; type: string }>;
  merchant: MerchantBrand;
  methods: PublicMethod[];
  customer: { phone: string | null; phone_verified: boolean; name: string | null; address: Address | null };
  collect: { phone: Collect; name: Collect; shipping_address: Collect };
  locale: string;
  expires_at: string;
  cancel_url: string | null;
  livemode: boolean;
  profile?: { name: string | null; addresses: Address[]; instruments: unknown[] };
}

export interface AttemptPoll {
  attempt_id: string;
  code: string;
  method: string;
  status: 'pending' | 'succeeded' | 'failed' | 'canceled';
  session_status: string;
  payment_status: string;
  redirect_to: string | null;
  failure_reason: string | null;
  present: { amount: number; currency: string };
  cancel_url: string | null;
}

/** The poll without the session code (`GET /public/attempts/{id}`). */
export interface AttemptLookup extends AttemptPoll {
  merchant: MerchantBrand;
  locale: string;
  livemode: boolean;
}

/** `GET /public/test-gateway/{id}`. */
export interface TestGatewayRead {
  attempt_id: string;
  status: string;
  amount: number;
  currency: string;
  merchant: { display_name: string };
  livemode: boolean;
  return_url: string;
}
