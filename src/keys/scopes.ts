/** Partner API scopes. */
export const partnerScopes = [
  'catalog:read',
  'catalog:write',
  'inventory:write',
  'orders:read',
  'webhooks:manage',
] as const;
export type PartnerScope = (typeof partnerScopes)[number];

/** Checkout API scopes (same set in live and test). */
export const checkoutScopes = [
  'sessions:write',
  'sessions:read',
  'refunds:write',
  'refunds:read',
  'webhooks:manage',
  'events:read',
  'customers:read',
] as const;
export type CheckoutScope = (typeof checkoutScopes)[number];

/** Splits a comma-separated scope list and checks each against `known`; throws naming the bad one. */
export function parseScopes<S extends string>(list: string, known: readonly S[]): S[] {
  const scopes = list
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const s of scopes) {
    if (!known.includes(s as S)) throw new Error(`unknown scope ${s}; known: ${known.join(', ')}`);
  }
  return [...new Set(scopes)] as S[];
}
