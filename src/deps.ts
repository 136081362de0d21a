/**
 * The app's dependency wiring in one place: what the HTTP app needs from the outside world, and how
 * each route family's dependencies derive from it. Route modules import this, never `src/app.ts`.
 */
import type { Client } from '@temporalio/client';
import type { AttemptStreamHub } from './checkout/attempts/attempt-stream-hub';
import type { Settings } from './config';
import type { Db } from './db/knex';
import type { PartnerChainDeps } from './http/partner-chain';
import type { Clock } from './lib/clock';
import type { WebhookRuntime } from './webhooks/runtime';

/** What the HTTP app needs from the outside world. */
export interface AppDeps {
  db: Db;
  settings: Settings;
  clock: Clock;
  /** Temporal client; handlers start and signal workflows through it. */
  temporal: Client;
  /**
   * The process's attempt streams and their one LISTEN connection (the API closes them when it
   * stops); the public routes make their own when absent.
   */
  attemptStreams?: AttemptStreamHub;
  /** Webhook secrets cipher, resolver and allow-list; built from `settings` when absent. */
  webhooks?: WebhookRuntime;
  /**
   * Fault injection for tests: runs after a state change committed and before its workflow handoff
   * is delivered (a throw is the process dying there; the handoff relay heals it). Never set in production.
   */
  beforeHandoff?: () => void | Promise<void>;
}

export function partnerChainDeps(deps: AppDeps): PartnerChainDeps {
  return {
    db: deps.db,
    clock: deps.clock,
    environment: deps.settings.PARTNER_ENVIRONMENT,
    bulkLimit: {
      limit: deps.settings.PARTNER_BULK_RATE_LIMIT,
      windowSeconds: deps.settings.PARTNER_BULK_RATE_WINDOW_SECONDS,
    },
  };
}
