import type { Client } from '@temporalio/client';
import type { Db } from '../../db/knex';
import type { KeyMode } from '../../keys/keys';
import type { Clock } from '../../lib/clock';

/** What the session services need: Postgres decides, Temporal holds the timers. */
export interface SessionDeps {
  db: Db;
  clock: Clock;
  temporal: Client;
  /** The task queue session workflows run on. */
  taskQueue: string;
  /** The hosted page's base address, for session `url`s. */
  publicBaseUrl: string;
  /** Fault injection for tests (HandoffDeps): runs between a commit and its handoff. */
  beforeHandoff?: () => void | Promise<void>;
}

/** The merchant and mode a key acts for; every query carries both. */
export interface MerchantScope {
  merchantId: string;
  mode: KeyMode;
  /** The merchant's display name, when the caller knows it (for workflow summaries). */
  merchantName?: string;
}
