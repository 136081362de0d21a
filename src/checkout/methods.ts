/** The payment methods this service knows, in display order; data, not code. */
export interface MethodDefinition {
  code: string;
  display_name: { ar: string; ku: string; en: string };
  flow: 'redirect' | 'offline';
  currencies: string[];
  limits: Record<string, { min: number | null; max: number | null }>;
  capabilities: { refunds: 'partial' | 'full_only' | 'none'; saved_instruments: boolean; wallets: string[] };
  /** Only usable in test mode. */
  testOnly: boolean;
  /** Whether the service can complete payments with it here; the others are `vendor_not_configured`. */
  completesHere: boolean;
}

export const methodCatalog: readonly MethodDefinition[] = [
  {
    code: 'test',
    display_name: { ar: 'بوابة الاختبار', ku: 'دەروازەی تاقیکردنەوە', en: 'Test gateway' },
    flow: 'redirect',
    currencies: ['IQD', 'USD'],
    limits: { IQD: { min: 1, max: null }, USD: { min: 1, max: null } },
    capabilities: { refunds: 'partial', saved_instruments: false, wallets: [] },
    testOnly: true,
    completesHere: true,
  },
  {
    code: 'cashondelivery',
    display_name: { ar: 'الدفع عند الاستلام', ku: 'پارەدان لە کاتی گەیاندن', en: 'Cash on delivery' },
    flow: 'offline',
    currencies: ['IQD'],
    limits: { IQD: { min: 1, max: 5_000_000 } },
    capabilities: { refunds: 'none', saved_instruments: false, wallets: [] },
    testOnly: false,
    completesHere: true,
  },
  {
    code: 'card',
    display_name: { ar: 'بطاقة مصرفية', ku: 'کارتی بانکی', en: 'Card' },
    flow: 'redirect',
    currencies: ['IQD', 'USD'],
    limits: { IQD: { min: 1000, max: null }, USD: { min: 100, max: null } },
    capabilities: { refunds: 'partial', saved_instruments: true, wallets: ['apple_pay', 'google_pay'] },
    testOnly: false,
    completesHere: false,
  },
  {
    code: 'zaincash',
    display_name: { ar: 'زين كاش', ku: 'زەین کاش', en: 'ZainCash' },
    flow: 'redirect',
    currencies: ['IQD'],
    limits: { IQD: { min: 250, max: 10_000_000 } },
    capabilities: { refunds: 'full_only', saved_instruments: false, wallets: [] },
    testOnly: false,
    completesHere: false,
  },
  {
    code: 'fastpay',
    display_name: { ar: 'فاست باي', ku: 'فاست پەی', en: 'FastPay' },
    flow: 'redirect',
    currencies: ['IQD'],
    limits: { IQD: { min: 250, max: 10_000_000 } },
    capabilities: { refunds: 'full_only', saved_instruments: false, wallets: [] },
    testOnly: false,
    completesHere: false,
  },
];

export function findMethod(code: string): MethodDefinition | undefined {
  return methodCatalog.find((m) => m.code === code);
}
