import type { Knex } from 'knex';
import * as foundation from './20261121000000_foundation';
import * as partnerStock from './20261121010000_partner_stock';
import * as checkoutSessions from './20261121020000_checkout_sessions';
import * as webhooks from './20261121040000_webhooks';
import * as checkoutPayments from './20261121060000_checkout_payments';
import * as hostedPageKeys from './20261121080000_hosted_page_keys';
import * as outboxRelay from './20261121100000_outbox_relay';
import * as outboxRetention from './20261124100000_outbox_retention';
import * as idempotentCreates from './20261124110000_idempotent_creates';
import * as webhookQueue from './20261124120000_webhook_queue';
import * as unloggedRateLimits from './20261124130000_unlogged_rate_limits';
import * as workflowHandoffs from './20261124140000_workflow_handoffs';
import * as fastForward from './20261124150000_fast_forward';
import * as idempotencyJson from './20261124160000_idempotency_json';
import * as variantCounts from './20261124170000_variant_counts';
import * as backlogGaugeIndexes from './20261125110000_backlog_gauge_indexes';
import * as traceContext from './20261125115000_trace_context';
import * as deliveryResponses from './20261125120000_delivery_responses';
import * as failingNotice from './20261125120100_failing_notice';
import * as partitionedEventLog from './20261125200000_partitioned_event_log';
import * as hotTableStorage from './20261125201000_hot_table_storage';
import * as variantCountsConstant from './20261125202000_variant_counts_constant';
import * as eventPayload from './20261126020000_event_payload';
import * as eventDayAdoptsDefault from './20261126021000_event_day_adopts_default';
import * as pendingQueue from './20261126030000_pending_queue';
import * as eventListKeys from './20261126040000_event_list_keys';
import * as deliveryTenantOptional from './20261126041000_delivery_tenant_optional';
import * as undeliveredBackfill from './20261126050000_undelivered_backfill';
import * as deliveryTenantDrop from './20261127120000_delivery_tenant_drop';
import * as consoleAccounts from './20261127140000_console_accounts';
import * as endpointWatches from './20261127180000_endpoint_watches';
import * as consolePasskeys from './20261127190000_console_passkeys';
import * as consoleInventory from './20261128100000_console_inventory';
import * as deliveryEndpointIndex from './20261201100000_delivery_endpoint_index';
import * as consoleReauthInvites from './20261201100100_console_reauth_invites';

/**
 * When a migration runs in a release that rolls under load (docs/operations.md, "Releasing"):
 * `expand` while the previous release still serves (it only adds what that release ignores),
 * `contract` once no process of the previous release is left (drops, VALIDATE, SET NOT NULL).
 */
export type Phase = 'expand' | 'contract';

/** One migration file. src/db/migrator.ts runs it; `npm test` lints the SQL of every new one. */
export interface Migration {
  up(knex: Knex): Promise<void>;
  /** Forward-only: every migration throws here (knex refuses a migration without one). */
  down(knex: Knex): Promise<void>;
  phase: Phase;
  /** `{ transaction: false }` for a migration that builds indexes CONCURRENTLY (it must be re-runnable). */
  config?: { transaction?: boolean };
  /**
   * Longer timeouts than the runner's (src/db/migrator.ts, MIGRATION_TIMEOUTS), e.g. for an index
   * built CONCURRENTLY over a year of rows; positive milliseconds (0, "none", is refused).
   */
  timeouts?: { lockMs?: number; statementMs?: number };
}

/** Migrations by name, in the order they apply. */
export type MigrationList = ReadonlyArray<readonly [string, Migration]>;

/** Every migration in order; new ones are appended here (forward-only, never edited). */
export const migrations: MigrationList = [
  ['20261121000000_foundation', foundation],
  ['20261121010000_partner_stock', partnerStock],
  ['20261121020000_checkout_sessions', checkoutSessions],
  ['20261121040000_webhooks', webhooks],
  ['20261121060000_checkout_payments', checkoutPayments],
  ['20261121080000_hosted_page_keys', hostedPageKeys],
  ['20261121100000_outbox_relay', outboxRelay],
  ['20261124100000_outbox_retention', outboxRetention],
  ['20261124110000_idempotent_creates', idempotentCreates],
  ['20261124120000_webhook_queue', webhookQueue],
  ['20261124130000_unlogged_rate_limits', unloggedRateLimits],
  ['20261124140000_workflow_handoffs', workflowHandoffs],
  ['20261124150000_fast_forward', fastForward],
  ['20261124160000_idempotency_json', idempotencyJson],
  ['20261124170000_variant_counts', variantCounts],
  ['20261125110000_backlog_gauge_indexes', backlogGaugeIndexes],
  ['20261125115000_trace_context', traceContext],
  ['20261125120000_delivery_responses', deliveryResponses],
  ['20261125120100_failing_notice', failingNotice],
  ['20261125200000_partitioned_event_log', partitionedEventLog],
  ['20261125201000_hot_table_storage', hotTableStorage],
  ['20261125202000_variant_counts_constant', variantCountsConstant],
  ['20261126020000_event_payload', eventPayload],
  ['20261126021000_event_day_adopts_default', eventDayAdoptsDefault],
  ['20261126030000_pending_queue', pendingQueue],
  ['20261126040000_event_list_keys', eventListKeys],
  ['20261126041000_delivery_tenant_optional', deliveryTenantOptional],
  ['20261126050000_undelivered_backfill', undeliveredBackfill],
  ['20261127120000_delivery_tenant_drop', deliveryTenantDrop],
  ['20261127140000_console_accounts', consoleAccounts],
  ['20261127180000_endpoint_watches', endpointWatches],
  ['20261127190000_console_passkeys', consolePasskeys],
  ['20261128100000_console_inventory', consoleInventory],
  ['20261201100000_delivery_endpoint_index', deliveryEndpointIndex],
  ['20261201100100_console_reauth_invites', consoleReauthInvites],
];

/**
 * A knex migration source over `list` (by name), so migrations run the same under tsx, jest and
 * node; a test adds fixtures to the list.
 */
export function sourceOf(list: MigrationList = migrations): Knex.MigrationSource<string> {
  const byName = new Map(list);
  return {
    getMigrations: async () => list.map(([name]) => name),
    getMigrationName: (name) => name,
    getMigration: async (name) => {
      const migration = byName.get(name);
      if (!migration) throw new Error(`no migration ${name}`);
      return migration;
    },
  };
}

/** The source of this release's migrations. */
export const migrationSource = sourceOf();
