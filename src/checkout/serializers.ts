import type { MerchantMethod } from './payment-methods';

/** PaymentMethod as the Checkout API shows it. */
export function paymentMethodOut(m: MerchantMethod) {
  return {
    code: m.code,
    display_name: m.display_name,
    flow: m.flow,
    currencies: m.currencies,
    limits: m.limits,
    capabilities: m.capabilities,
    enabled: m.enabled,
  };
}
