/** Console roles (docs/console.md): what each may do is the `may` table below, checked on the server. */
export const consoleRoles = ['owner', 'developer', 'operator', 'viewer'] as const;
export type ConsoleRole = (typeof consoleRoles)[number];

/** Every console action that changes state or reveals a secret, with the roles allowed to do it. */
export const may = {
  /** Partner API keys: create, re-scope, revoke (Settings › Integrations). */
  'partner_keys.manage': ['owner', 'developer'],
  /** Orders: accept, ship, cancel, one or in bulk. */
  'orders.transition': ['owner', 'operator'],
  /** Products: submit for review, resubmit after a rejection. */
  'products.submit': ['owner', 'operator'],
  /** Inventory: set a SKU's stock and price, record a stock adjustment. */
  'inventory.write': ['owner', 'operator'],
  /** The tenant's users: list, invite, change a role, disable and enable; pending invites: list, revoke. */
  'users.manage': ['owner'],
  /** Merchant webhook endpoints: create, edit, disable/enable, rotate the secret, test, resend, recover. */
  'webhooks.manage': ['owner', 'developer'],
  /** Merchant Checkout API keys: create, roll, revoke. */
  'checkout_keys.manage': ['owner', 'developer'],
  /** Merchant payments: refund a session (full or partial), as `POST /v1/refunds`. */
  'refunds.create': ['owner', 'operator'],
  /** The tenant's audit log. */
  'audit.read': ['owner'],
} as const satisfies Record<string, readonly ConsoleRole[]>;
export type ConsoleAction = keyof typeof may;

export function allowed(role: ConsoleRole, action: ConsoleAction): boolean {
  return (may[action] as readonly ConsoleRole[]).includes(role);
}

export function isConsoleRole(value: string): value is ConsoleRole {
  return (consoleRoles as readonly string[]).includes(value);
}
