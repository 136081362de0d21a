import type { Db } from '../src/db/knex';
import type { Gateways } from '../src/checkout/gateways';
import type { Clock } from '../src/lib/clock';
import type { WebhookRuntime } from '../src/webhooks/runtime';
import { createAttemptActivities } from './attempts';
import { createDeliveryActivities } from './delivery';
import { createJanitorActivities } from './janitor';
import { createRefundActivities } from './refunds';
import { createSessionActivities } from './session';

export interface ActivityDeps {
  db: Db;
  clock: Clock;
  /** The hosted page's base address, for session `url`s in event payloads. */
  publicBaseUrl: string;
  /** Webhook secrets cipher, resolver, allow-list and extra CAs. */
  webhooks: WebhookRuntime;
  /** The payment vendors (default: the test gateway and cash on delivery). */
  gateways?: Gateways;
  /** Aborted when the worker process stops: long activities stop taking new work (see each). */
  stopping?: AbortSignal;
}

/** Every activity the worker registers, built from injected dependencies. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createJanitorActivities(deps),
    ...createSessionActivities(deps),
    ...createAttemptActivities(deps),
    ...createRefundActivities(deps),
    ...createDeliveryActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
