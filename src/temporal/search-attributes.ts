import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/**
 * Custom search attributes: how an operator finds a workflow in the Temporal UI by the business
 * ids they know (`ReferenceId = "order-1042"`, `MerchantId = "m_…" AND SessionStatus = "processing"`).
 * All are Keyword. `npm start` registers them on its dev server and the test stacks on their
 * test servers (./search-attribute-setup.ts); on a cluster: `temporal operator search-attribute create --name MerchantId --type Keyword` (each).
 */
export const merchantIdKey = defineSearchAttributeKey('MerchantId', SearchAttributeType.KEYWORD);
/** `test` or `live`. */
export const modeKey = defineSearchAttributeKey('Mode', SearchAttributeType.KEYWORD);
/** The merchant's `reference_id` of a checkout session. */
export const referenceIdKey = defineSearchAttributeKey('ReferenceId', SearchAttributeType.KEYWORD);
/** The session's status, kept current by its workflow: `open`, `processing`, `completed`, `expired`, `canceled`. */
export const sessionStatusKey = defineSearchAttributeKey('SessionStatus', SearchAttributeType.KEYWORD);
/** The webhook endpoint a delivery workflow serves. */
export const endpointIdKey = defineSearchAttributeKey('EndpointId', SearchAttributeType.KEYWORD);
/** `enabled`, `failing` (deliveries failing, the 3-day clock running) or `disabled`, kept current by the delivery workflow. */
export const endpointStatusKey = defineSearchAttributeKey('EndpointStatus', SearchAttributeType.KEYWORD);

/** Every custom search attribute, for registering them on a server. */
export const searchAttributeKeys = [
  merchantIdKey,
  modeKey,
  referenceIdKey,
  sessionStatusKey,
  endpointIdKey,
  endpointStatusKey,
] as const;
