import { defineSignal } from '@temporalio/workflow';

/**
 * Messages of the per-endpoint delivery workflow (workflow id = endpoint id), shared by the
 * dispatcher, the API and the workflow. Safe in the workflow bundle: it imports nothing with I/O.
 */
export const deliveryWorkflowType = 'deliveryWorkflow';

/** Deliveries to queue: events, and their generation (0 for the first dispatch, a new one per redelivery). */
export interface DeliverRequest {
  eventIds: string[];
  generation: number;
}

/** A delivery waiting for its next attempt, kept as workflow data. */
export interface PendingDelivery {
  eventId: string;
  generation: number;
  attemptNo: number;
  dueAtMs: number;
}

/** What a delivery workflow carries across continue-as-new. */
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

/** Queue events for the endpoint (each ignored when that event and generation is pending or recently done). */
export const deliverSignal = defineSignal<[DeliverRequest]>('deliver');

/** The endpoint was deleted: cancel every scheduled retry (recorded as `endpoint_deleted`) and stop. */
export const endpointDeletedSignal = defineSignal('endpointDeleted');
