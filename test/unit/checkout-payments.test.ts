import { amountRuleOutcome, refundRuleOutcome } from '../../src/checkout/amount-rule';
import { methodCatalog } from '../../src/checkout/methods';
import { convertAmount, convertAmountExact, methodAvailability, presentFor } from '../../src/checkout/presentment';
import { attemptSchedule, recheckDelays } from '../../src/temporal/session';

const method = (code: string, enabled = true) => ({ ...methodCatalog.find((m) => m.code === code)!, enabled });
const iqd = (amount: number, presentment: { currency: string; fx_rate: number } | null = null) => ({
  amount,
  currency: 'IQD',
  presentment,
});

describe('amount rule', () => {
  it.each([
    [25001, 'declined'],
    [1, 'declined'],
    [25002, 'pending'],
    [25003, 'delayed_success'],
    [25000, 'succeeded'],
    [25004, 'succeeded'],
    [1001001, 'declined'],
    [10010, 'succeeded'],
  ])('reads the last three digits of the presented amount: %i is %s', (amount, outcome) => {
    expect(amountRuleOutcome(amount)).toBe(outcome);
  });

  it('declines a test-gateway refund whose amount ends in 001 and settles every other', () => {
    expect(refundRuleOutcome(1001)).toBe('declined');
    expect(refundRuleOutcome(1000)).toBe('succeeded');
  });
});

describe('attempt schedule', () => {
  it('re-checks a pending attempt after 30 s, 1, 2, 5, 10, 30 minutes, then hourly, up to exactly 24 hours', () => {
    const delays = recheckDelays(0).map((ms) => ms / 1000);
    expect(delays.slice(0, 8)).toEqual([30, 60, 120, 300, 600, 1800, 3600, 3600]);
    expect(delays.reduce((a, b) => a + b, 0)).toBe(attemptSchedule.timeoutMs / 1000);
    expect(delays.at(-1)).toBe(690);
    expect(delays.every((d) => d > 0)).toBe(true);
  });
});

describe('presentment', () => {
  it('converts between minor units exactly, rounding half up', () => {
    expect(convertAmount(25000, 'IQD', 'USD', 0.00068)).toBe(1700);
    expect(convertAmount(1000, 'USD', 'IQD', 1310)).toBe(13100);
    expect(convertAmount(45000, 'IQD', 'USD', 0.000763)).toBe(3434); // 3433.5 rounds up
    expect(convertAmount(9007199254740991, 'IQD', 'IQD', 1)).toBe(9007199254740991);
  });

  it('converts in bigint end to end, and gives null for an amount beyond 2^53 − 1 rather than a rounded one', () => {
    expect(convertAmountExact(687_572_000_000_001, 'USD', 'IQD', 1310)).toBe(9_007_193_200_000_013n); // .1 rounds down
    expect(convertAmount(687_572_000_000_001, 'USD', 'IQD', 1310)).toBe(9_007_193_200_000_013);
    expect(convertAmountExact(687_572_000_000_000_000n, 'USD', 'IQD', 1310)).toBe(9_007_193_200_000_000_000n);
    expect(convertAmountExact(700_000_000_000_001, 'USD', 'IQD', 1310)).toBe(9_170_000_000_000_013n);
    expect(convertAmount(700_000_000_000_001, 'USD', 'IQD', 1310)).toBeNull();
    const usd = { amount: 700_000_000_000_001, currency: 'USD', presentment: null };
    expect(presentFor(usd, method('cashondelivery'), new Map([['IQD', 1310]]))).toBeNull();
  });

  it("presents in the session's presentment currency when the method takes it, else the session currency", () => {
    const rates = new Map<string, number>();
    expect(presentFor(iqd(25000, { currency: 'USD', fx_rate: 0.00068 }), method('test'), rates)).toEqual({
      amount: 1700,
      currency: 'USD',
      fxRate: 0.00068,
    });
    expect(presentFor(iqd(25000, { currency: 'USD', fx_rate: 0.00068 }), method('cashondelivery'), rates)).toEqual({
      amount: 25000,
      currency: 'IQD',
      fxRate: null,
    });
  });

  it("falls back to the operator's rate table for a method that takes neither", () => {
    const usd = { amount: 1000, currency: 'USD', presentment: null };
    expect(presentFor(usd, method('cashondelivery'), new Map([['IQD', 1310]]))).toEqual({
      amount: 13100,
      currency: 'IQD',
      fxRate: 1310,
    });
    expect(presentFor(usd, method('cashondelivery'), new Map())).toBeNull();
    expect(methodAvailability(usd, method('cashondelivery'), new Map()).unavailableReason).toBe(
      'currency_not_supported',
    );
  });

  it('gives the first reason a method is unavailable', () => {
    const none = new Map<string, number>();
    expect(methodAvailability(iqd(25000), method('card'), none).unavailableReason).toBe('vendor_not_configured');
    expect(methodAvailability(iqd(25000), method('test', false), none).unavailableReason).toBe('not_enabled');
    expect(methodAvailability(iqd(5_000_001), method('cashondelivery'), none).unavailableReason).toBe(
      'amount_out_of_range',
    );
    expect(methodAvailability(iqd(25000), method('test'), none)).toMatchObject({
      available: true,
      unavailableReason: null,
    });
  });
});
