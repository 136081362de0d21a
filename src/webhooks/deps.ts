/** Dependencies of the webhook API services (Postgres, clock, Temporal, runtime) and the merchant scope they act in. */
import type { Client } from '@temporalio/client';
import type { Db } from '../db/knex';
import type { KeyMode } from '../keys/keys';
import type { Clock } from '../lib/clock';
import type { WebhookRuntime } from './runtime';

/** What the webhook services need: Postgres decides, Temporal runs the per-endpoint delivery workflows. */
export interface WebhookDeps {
  db: Db;
  clock: Clock;
  temporal: Client;
  /** The task queue delivery workflows run on. */
  taskQueue: string;
  runtime: WebhookRuntime;
}

/** The merchant and mode a key acts for; every query carries both. */
export interface MerchantScope {
  merchantId: string;
  mode: KeyMode;
}
