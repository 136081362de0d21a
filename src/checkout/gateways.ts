import type { KeyMode } from '../keys/keys';
import { sha256Hex } from '../lib/hash';
import { randomString } from '../lib/ids';
import { amountRuleOutcome, refundRuleOutcome } from './amount-rule';

/** What a gateway is told about an attempt. */
export interface GatewayAttempt {
  id: string;
  mode: KeyMode;
  presentedAmount: number;
  presentedCurrency: string;
}

/** The vendor refused to start the payment, or could not: `502 gateway_error`, and the attempt failed. */
export class GatewayInitiationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GatewayInitiationError';
  }
}

/** A payment vendor behind one or more methods; the only place that talks to it. */
export interface PaymentGateway {
  /** The name shown as `gateway` on payments and failed attempts. */
  readonly name: string;
  /** Whether the vendor has credentials for `mode` (otherwise `503 gateway_not_configured`). */
  configured(mode: KeyMode): boolean;
  /**
   * Starts the payment: the vendor's reference, and where the shopper goes (null for offline
   * methods). Throws GatewayInitiationError when the vendor refuses.
   */
  initiate(
    attempt: GatewayAttempt,
    hostedBaseUrl: string,
  ): Promise<{ gatewayReference: string | null; redirectUrl: string | null }>;
  /** The vendor's current answer on a pending attempt. */
  check(attempt: GatewayAttempt): Promise<'pending' | 'succeeded' | 'failed'>;
  /**
   * Refunds part or all of a captured payment. `idempotencyKey` (the refund id) is the vendor's
   * idempotency key: asked again with the same key, the vendor answers the first refund again and
   * moves no more money.
   */
  refund(input: {
    idempotencyKey: string;
    attemptId: string;
    gatewayReference: string | null;
    amount: number;
    currency: string;
  }): Promise<{ status: 'succeeded'; gatewayReference: string } | { status: 'failed'; reason: string }>;
}

/** Gateways by method code; a method without one cannot complete here. */
export type Gateways = Readonly<Record<string, PaymentGateway>>;

const hostedBase = (url: string) => url.replace(/\/$/, '');

/**
 * The simulated vendor of the `test` method (test mode only): the hosted page sends the shopper to
 * `/t/<attempt_id>`, whose buttons or the amount rule decide; partial refunds settle at once.
 */
export const testGateway: PaymentGateway = {
  name: 'test',
  configured: (mode) => mode === 'test',
  async initiate(attempt, hostedBaseUrl) {
    return { gatewayReference: `tgw_${randomString(24)}`, redirectUrl: `${hostedBase(hostedBaseUrl)}/t/${attempt.id}` };
  },
  async check(attempt) {
    const outcome = amountRuleOutcome(attempt.presentedAmount);
    return outcome === 'pending' ? 'pending' : outcome === 'declined' ? 'failed' : 'succeeded';
  },
  async refund({ amount, idempotencyKey }) {
    // Keyed like a real vendor: the same key gives the same refund reference.
    return refundRuleOutcome(amount) === 'declined'
      ? { status: 'failed', reason: 'simulated_decline' }
      : { status: 'succeeded', gatewayReference: `tgr_${sha256Hex(`test-refund:${idempotencyKey}`).slice(0, 24)}` };
  },
};

/** Cash on delivery: nothing to start and no money moves, so nothing to refund. */
export const offlineGateway: PaymentGateway = {
  name: 'offline',
  configured: () => true,
  async initiate() {
    return { gatewayReference: null, redirectUrl: null };
  },
  async check() {
    return 'pending';
  },
  async refund() {
    return { status: 'failed', reason: 'not_refundable' };
  },
};

/** The gateways this service has: the test gateway and cash on delivery. */
export const defaultGateways: Gateways = { test: testGateway, cashondelivery: offlineGateway };
