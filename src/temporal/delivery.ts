import type { Client } from '@temporalio/client';
import { defineSignal } from '@temporalio/workflow';
import type { endpointDeliveryWorkflow } from '../../workflows/delivery-endpoint';
import type { KeyMode } from '../keys/keys';
import { endpointIdKey, merchantIdKey, modeKey } from './search-attributes';

/**
 * The contract of the per-endpoint delivery workflows (workflow id = endpoint id): types, input,
 * signals, and the only helpers that start or signal them, shared by the dispatcher, the API and
 * the workflows. Safe in the workflow bundle: it imports nothing with I/O.
 */

/** An endpoint's delivery workflow id. */
export const endpointWorkflowId = (endpointId: string): string => endpointId;

/** The workflow type new runs start on: pending deliveries live in Postgres (`webhook_queue`). */
export const endpointDeliveryWorkflowType = 'endpointDeliveryWorkflow';

/**
 * The type before pending deliveries moved to Postgres: it kept its queue in workflow state. Still
 * registered so that its runs in flight finish; each moves its queue into Postgres and continues as
 * an `endpointDeliveryWorkflow` at its next workflow task (`workflows/delivery.ts`).
 */
export const deliveryWorkflowType = 'deliveryWorkflow';

/** POSTs in flight to one endpoint at most, unless its `max_in_flight` says otherwise. */
export const DEFAULT_MAX_IN_FLIGHT = 20;

/** The task queue of the webhook delivery activities, beside the workflows' own (`svc-main` → `svc-main-webhooks`). */
export const webhookActivityQueue = (workflowTaskQueue: string) => `${workflowTaskQueue}-webhooks`;

export interface EndpointDeliveryInput {
  endpointId: string;
  /** For the search attributes and the summary (set by whoever starts the workflow). */
  merchantId?: string;
  mode?: 'test' | 'live';
  /** The endpoint's `max_in_flight` when started (each batch reports it afterwards). */
  maxInFlight?: number;
  /** Carried across continue-as-new: when the endpoint's current run of failures began (workflow time). */
  failingSinceMs?: number | null;
  /** Carried across continue-as-new: the failure run (its start) whose 24-hour e-mail was seen to. */
  failingNoticedForMs?: number | null;
  /** Continue as new past this many history events (default 1,000 for runs since patch delivery-shorter-runs, 5,000 before; tests and the benchmark set it). */
  historyLimit?: number;
}

/** Rows were queued for the endpoint (how many, when known): look for due deliveries now. Repeats are harmless. */
export interface WakeRequest {
  count?: number;
}
export const wakeSignal = defineSignal<[WakeRequest]>('wake');

/** Deliveries to queue: events, and their generation (0 for the first dispatch, a new one per redelivery). */
export interface DeliverRequest {
  eventIds: string[];
  generation: number;
}

/**
 * The old types's way of queueing (the events themselves in the signal). An `endpointDeliveryWorkflow`
 * still accepts it, from a dispatcher of the previous release during a rolling deploy, and queues
 * the events in Postgres.
 */
export const deliverSignal = defineSignal<[DeliverRequest]>('deliver');

/** The endpoint was deleted: cancel every scheduled retry (recorded as `endpoint_deleted`) and stop. */
export const endpointDeletedSignal = defineSignal('endpointDeleted');

/** A delivery waiting for its next attempt, kept as workflow data (the old type). */
export interface PendingDelivery {
  eventId: string;
  generation: number;
  attemptNo: number;
  dueAtMs: number;
}

/** What the old type carries across continue-as-new. */
export interface DeliveryState {
  /** [eventId, generation, attemptNo, dueAtMs], due order. */
  pending: Array<[string, number, number, number]>;
  /** Keys (`eventId#generation`) finished lately, oldest first, so a repeated signal is ignored. */
  recent: string[];
  /** When the endpoint's current run of failures began (workflow time), or null. */
  failingSinceMs: number | null;
}

export interface DeliveryWorkflowInput {
  endpointId: string;
  state?: DeliveryState;
  /** Continue as new past this many history events (default 5,000; tests lower it). */
  historyLimit?: number;
}

/** What starting an endpoint's workflow needs to label it for operators. */
export interface WakeTarget {
  id: string;
  merchantId: string;
  mode: KeyMode;
  url: string;
  merchantName: string;
  maxInFlight?: number;
}

/** Start options of an endpoint's delivery workflow: id, input, search attributes, summary. */
function startOptions(taskQueue: string, target: WakeTarget) {
  const input: EndpointDeliveryInput = {
    endpointId: target.id,
    merchantId: target.merchantId,
    mode: target.mode,
    maxInFlight: target.maxInFlight,
  };
  return {
    workflowId: endpointWorkflowId(target.id),
    taskQueue,
    args: [input] as [EndpointDeliveryInput],
    typedSearchAttributes: [
      { key: endpointIdKey, value: target.id },
      { key: merchantIdKey, value: target.merchantId },
      { key: modeKey, value: target.mode },
    ],
    staticSummary: `webhooks to ${target.url} (merchant ${target.merchantName}, ${target.mode})`,
  };
}

/**
 * Tells an endpoint's workflow (workflow id = endpoint id) that rows were queued for it, starting
 * it if none runs. Idempotent: a wake only makes the workflow look at its queue.
 */
export async function wakeEndpoint(temporal: Client, taskQueue: string, target: WakeTarget, count?: number) {
  await temporal.workflow.signalWithStart<typeof endpointDeliveryWorkflow, [WakeRequest]>(
    endpointDeliveryWorkflowType,
    {
      ...startOptions(taskQueue, target),
      signal: wakeSignal,
      signalArgs: [{ count }],
    },
  );
}

/** Tells a deleted endpoint's workflow to record its scheduled retries as `endpoint_deleted` (started if none runs). */
export async function signalEndpointDeleted(temporal: Client, taskQueue: string, target: WakeTarget) {
  await temporal.workflow.signalWithStart<typeof endpointDeliveryWorkflow, []>(endpointDeliveryWorkflowType, {
    ...startOptions(taskQueue, target),
    signal: endpointDeletedSignal,
    signalArgs: [],
  });
}
