import { performance } from 'node:perf_hooks';
import { randomString } from '../../src/lib/ids';
import type { Balancer, Outcome } from './fleet';

/** A merchant of the run: its keys and where its webhook endpoint receives. */
export interface LoadMerchant {
  index: number;
  secretKey: string;
  publishableKey: string;
}

/** A seller of the run: its Partner key and the SKUs whose stock and price it keeps writing. */
export interface LoadSeller {
  index: number;
  key: string;
  skus: string[];
}

/** One request as the load saw it: when it was sent (wall clock), its route, and what came back. */
export interface RequestRecord {
  at: number;
  route: string;
  status: number | null;
  connectionError?: string;
  ms: number;
  resent: boolean;
}

/** A session the load created (201), and where its journey got to. */
export interface Journey {
  sessionId: string;
  merchant: number;
  /** Amount ending 003: the attempt stays pending 30 s, then succeeds (a workflow timer across the deploy). */
  slow: boolean;
  state: 'created' | 'paid' | 'failed';
  refunds: string[];
  error?: string;
}

/** What the load sends, per second. */
export interface LoadRates {
  journeysPerSecond: number;
  /** Share of paid journeys followed by a partial refund. */
  refundShare: number;
  /** Share of journeys on the 30-second pending path (amount ending 003). */
  slowShare: number;
  /** Partner bulk writes per second, over all sellers. */
  partnerWritesPerSecond: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const SESSION_AMOUNT = 45_000;
const REFUND_AMOUNT = 1_000;

/** A test-mode session paid with the test method; `slow` adds 3 IQD so the amount ends in 003. */
export const sessionBody = (reference: string, slow: boolean) => ({
  reference_id: reference,
  amount: SESSION_AMOUNT + (slow ? 3 : 0),
  currency: 'IQD',
  line_items: [
    { label: 'Shirt', amount: 21_000, quantity: 2, type: 'charge' },
    { label: 'Delivery', amount: 3_000, type: 'shipping' },
    ...(slow ? [{ label: 'Rounding', amount: 3, type: 'charge' }] : []),
  ],
  payment_method_types: ['test'],
  collect: { phone: 'none', name: 'optional', shipping_address: 'none' },
  success_url: 'https://shop.example.com/done',
});

/** Thrown when an answer is not the one expected; the journey it ends counts as failed. */
class Unexpected extends Error {}

/**
 * Open-loop load on the APIs behind `balancer` while a deploy runs: shoppers' journeys (create a
 * session, read it on the public route, start a test attempt, press Succeed or wait out the
 * 30-second path, poll until paid), partial refunds of some paid sessions, polled until settled,
 * and each seller's Partner bulk writes (stock and price of its SKUs, new products), one at a time
 * per seller so the last acknowledged write is the state to expect. Every request is recorded
 * with the time it was sent (the bench puts it in its phase).
 */
export class Load {
  /** The deploy step under way, for the lock sampler. */
  phase = 'baseline';
  readonly records: RequestRecord[] = [];
  readonly journeys: Journey[] = [];
  readonly refunds = new Map<string, { merchant: number; sessionId: string }>();
  /** Per SKU, the on_hand and price of the last acknowledged write. */
  readonly stock = new Map<string, { seller: number; onHand: number; price: number }>();
  /** Products created by acknowledged bulk rows: SKU → product id. */
  readonly created = new Map<string, { seller: number; productId: string }>();
  readonly errors: string[] = [];
  private running = false;
  private readonly inFlight = new Set<Promise<void>>();
  private journeyCount = 0;

  constructor(
    private readonly balancer: Balancer,
    private readonly merchants: LoadMerchant[],
    private readonly sellers: LoadSeller[],
    private readonly rates: LoadRates,
  ) {}

  /**
   * Sends one request (`route` names its method and path pattern: `POST /v1/refunds`) and records it;
   * returns its JSON body, or throws `Unexpected` unless the status is `expected`.
   */
  private async expect(expected: number, route: string, path: string, headers: Record<string, string>, body?: unknown) {
    const at = Date.now();
    const outcome: Outcome = await this.balancer.request(route.split(' ')[0], path, headers, body);
    this.records.push({
      at,
      route,
      status: outcome.status,
      connectionError: outcome.connectionError,
      ms: outcome.ms,
      resent: outcome.resent,
    });
    if (outcome.status !== expected) {
      const what = outcome.connectionError ?? `${outcome.status} ${outcome.text.slice(0, 200)}`;
      throw new Unexpected(`${route} on ${outcome.backend ?? '-'}: ${what}`);
    }
    return JSON.parse(outcome.text);
  }

  /** One shopper's journey, and a refund after it for some. */
  private async journey(n: number): Promise<void> {
    const m = this.merchants[n % this.merchants.length];
    const slow = Math.random() < this.rates.slowShare;
    const secret = { authorization: `Bearer ${m.secretKey}` };
    const browser = {
      authorization: `Bearer ${m.publishableKey}`,
      'x-forwarded-for': `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`,
    };
    const session = await this.expect(
      201,
      'POST /v1/checkout/sessions',
      '/v1/checkout/sessions',
      { ...secret, 'idempotency-key': `upgrade_${randomString(24)}` },
      sessionBody(`upgrade-${n}-${randomString(8)}`, slow),
    );
    const journey: Journey = { sessionId: session.id, merchant: m.index, slow, state: 'created', refunds: [] };
    this.journeys.push(journey);
    try {
      const code = new URL(session.url).pathname.split('/').pop()!;
      await this.expect(200, 'GET /v1/public/sessions/:code', `/v1/public/sessions/${code}`, browser);
      const attempt = await this.expect(
        201,
        'POST /v1/public/sessions/:code/attempts',
        `/v1/public/sessions/${code}/attempts`,
        browser,
        { method: 'test' },
      );
      if (!slow)
        await this.expect(
          200,
          'POST /v1/public/test-gateway/:id/decide',
          `/v1/public/test-gateway/${attempt.attempt_id}/decide`,
          browser,
          { decision: 'succeeded' },
        );
      for (;;) {
        const state = await this.expect(
          200,
          'GET /v1/public/attempts/:id',
          `/v1/public/attempts/${attempt.attempt_id}`,
          browser,
        );
        if (state.status === 'succeeded' && state.payment_status === 'paid') break;
        if (state.status !== 'pending') throw new Unexpected(`attempt ${attempt.attempt_id} ended ${state.status}`);
        await sleep(slow ? 1000 : 200);
      }
      journey.state = 'paid';
      if (Math.random() < this.rates.refundShare) await this.refund(journey, secret);
    } catch (err) {
      if (journey.state !== 'paid') journey.state = 'failed';
      throw err;
    }
  }

  /** A partial refund of a paid session, polled until it has settled. */
  private async refund(journey: Journey, secret: Record<string, string>): Promise<void> {
    const refund = await this.expect(
      201,
      'POST /v1/refunds',
      '/v1/refunds',
      { ...secret, 'idempotency-key': `upgrade_${randomString(24)}` },
      { session_id: journey.sessionId, amount: REFUND_AMOUNT, reason: 'upgrade bench' },
    );
    journey.refunds.push(refund.id);
    this.refunds.set(refund.id, { merchant: journey.merchant, sessionId: journey.sessionId });
    for (;;) {
      const now = await this.expect(200, 'GET /v1/refunds/:id', `/v1/refunds/${refund.id}`, secret);
      if (now.status === 'succeeded') return;
      if (now.status !== 'requested') throw new Unexpected(`refund ${refund.id} ended ${now.status}`);
      await sleep(250);
    }
  }

  /** A seller's writes, one at a time: stock and price of every SKU, and every fifth time two new products. */
  private async sellerLoop(seller: LoadSeller, everyMs: number): Promise<void> {
    const headers = { authorization: `Bearer ${seller.key}` };
    for (let k = 1; this.running; k++) {
      const started = performance.now();
      try {
        const items = seller.skus.map((sku, i) => ({ external_sku: sku, on_hand: k + i, price_iqd: 1000 + k }));
        const body = await this.expect(
          200,
          'PATCH /partner/v1/inventory/bulk',
          '/partner/v1/inventory/bulk',
          { ...headers, 'idempotency-key': `upgrade_${randomString(24)}` },
          { items },
        );
        for (const [i, result] of (body.results as Array<{ status: string; external_sku: string }>).entries()) {
          if (result.status !== 'accepted') throw new Unexpected(`stock row ${result.external_sku} ${result.status}`);
          this.stock.set(items[i].external_sku, { seller: seller.index, onHand: k + i, price: 1000 + k });
        }
        if (k % 5 === 0) {
          const rows = ['a', 'b'].map((x) => ({
            external_sku: `UPG-${seller.index}-${k}-${x}`,
            title: `Upgrade product ${k}${x}`,
            price_iqd: 2500,
            initial_stock: 3,
          }));
          const made = await this.expect(
            200,
            'POST /partner/v1/products/bulk',
            '/partner/v1/products/bulk',
            { ...headers, 'idempotency-key': `upgrade_${randomString(24)}` },
            { items: rows },
          );
          for (const r of made.results as Array<{ status: string; external_sku: string; product_id?: string }>) {
            if (r.status !== 'accepted' || !r.product_id)
              throw new Unexpected(`product row ${r.external_sku} ${r.status}`);
            this.created.set(r.external_sku, { seller: seller.index, productId: r.product_id });
          }
        }
      } catch (err) {
        this.errors.push(err instanceof Error ? err.message : String(err));
      }
      await sleep(Math.max(0, everyMs - (performance.now() - started)));
    }
  }

  /** Starts the arrivals; they run until `stop`. */
  start(): void {
    this.running = true;
    const track = (p: Promise<void>) => {
      const tracked = p.catch(
        (err: unknown) => void this.errors.push(err instanceof Error ? err.message : String(err)),
      );
      this.inFlight.add(tracked);
      void tracked.finally(() => this.inFlight.delete(tracked));
    };
    const everyMs = 1000 / this.rates.journeysPerSecond;
    const arrivals = async () => {
      const started = performance.now();
      while (this.running) {
        const n = this.journeyCount++;
        track(this.journey(n));
        const due = started + (n + 1) * everyMs;
        await sleep(Math.max(0, due - performance.now()));
      }
    };
    track(arrivals());
    const perSeller = (1000 * this.sellers.length) / this.rates.partnerWritesPerSecond;
    for (const seller of this.sellers) track(this.sellerLoop(seller, perSeller));
  }

  /** Stops new arrivals and waits (at most `drainMs`) for the journeys, refunds and writes in flight; false if some were left. */
  async stop(drainMs: number): Promise<boolean> {
    this.running = false;
    const deadline = Date.now() + drainMs;
    while (this.inFlight.size > 0 && Date.now() < deadline) await sleep(100);
    return this.inFlight.size === 0;
  }
}
