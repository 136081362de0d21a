/**
 * The test gateway's amount rule: the simulated vendor's own answer when no button decides, read
 * from the last three digits of the presented amount. Pure, so workflows, activities and tests
 * share it.
 */
export const amountRule = {
  /** `…001`: declined at once (`simulated_decline`). */
  declinedSuffix: 1,
  /** `…002`: stays pending, re-checked on a backoff, fails with `timeout` 24 hours after it began. */
  pendingSuffix: 2,
  /** `…003`: pending for 30 seconds, then succeeds. */
  delayedSuffix: 3,
} as const;

export type AmountRuleOutcome = 'declined' | 'pending' | 'delayed_success' | 'succeeded';

/** What the simulated vendor does with `presentedAmount` (minor units); anything not listed succeeds. */
export function amountRuleOutcome(presentedAmount: number): AmountRuleOutcome {
  switch (presentedAmount % 1000) {
    case amountRule.declinedSuffix:
      return 'declined';
    case amountRule.pendingSuffix:
      return 'pending';
    case amountRule.delayedSuffix:
      return 'delayed_success';
    default:
      return 'succeeded';
  }
}

/**
 * The test gateway's refund rule, so merchants can exercise `refund.failed`: a refund whose amount
 * ends in `001` is declined by the simulated vendor; every other refund settles at once.
 */
export function refundRuleOutcome(refundAmount: number): 'succeeded' | 'declined' {
  return refundAmount % 1000 === amountRule.declinedSuffix ? 'declined' : 'succeeded';
}
