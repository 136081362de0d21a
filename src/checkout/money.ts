/** Minor-unit exponents of the currencies sessions can be priced and presented in. */
export const minorUnitExponents: Readonly<Record<string, number>> = { IQD: 0, USD: 2 };

export const lineItemTypes = ['charge', 'shipping', 'fee', 'discount'] as const;
export type LineItemType = (typeof lineItemTypes)[number];

export interface LineItem {
  label: string;
  amount: number;
  quantity: number;
  type: LineItemType;
}

/**
 * What the line items net to: `amount × quantity` each; a discount subtracts. Exact (bigint): a
 * product past 2^53 would round as a number and could land on the amount by accident.
 */
export function lineItemsTotal(items: LineItem[]): bigint {
  return items.reduce((sum, i) => sum + (i.type === 'discount' ? -1n : 1n) * BigInt(i.amount) * BigInt(i.quantity), 0n);
}
