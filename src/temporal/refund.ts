/**
 * The refund workflow's contract (workflow id = refund id): its input and the only helper that
 * starts it. The workflow imports this module too, so the client is a type here, never a value.
 */
import type { Client } from '@temporalio/client';
import {
  WorkflowExecutionAlreadyStartedError,
  WorkflowIdConflictPolicy,
  WorkflowIdReusePolicy,
} from '@temporalio/common';
import type { refundWorkflow } from '../../workflows/refund';
import { merchantIdKey, modeKey } from './search-attributes';

const workflowType = 'refundWorkflow';

/** The refund's workflow id: the refund id itself, so a refund is settled by one workflow. */
export const refundWorkflowId = (refundId: string): string => refundId;

/** Input of the refund workflow. */
export interface RefundWorkflowInput {
  refundId: string;
}

/** What starting a refund's workflow needs: the refund, and what an operator sees in the Temporal UI. */
export interface RefundStart {
  refundId: string;
  sessionId: string;
  merchantId: string;
  /** The merchant's display name, for the summary (omitted when the caller has none). */
  merchantName?: string;
  mode: string;
  amount: number;
  currency: string;
}

/** The static summary an operator reads at a glance in the Temporal UI. */
export function refundSummary(r: RefundStart): string {
  const merchant = r.merchantName ? `${r.merchantName} (${r.merchantId})` : r.merchantId;
  return `refund of ${r.amount} ${r.currency} on ${r.sessionId}, ${merchant}, ${r.mode}`;
}

/** Starts the refund's workflow (id = refund id); starting it again, even after it ended, is a no-op. */
export async function startRefundWorkflow(client: Client, taskQueue: string, refund: RefundStart): Promise<void> {
  try {
    await client.workflow.start<typeof refundWorkflow>(workflowType, {
      workflowId: refundWorkflowId(refund.refundId),
      taskQueue,
      args: [{ refundId: refund.refundId }],
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
      typedSearchAttributes: [
        { key: merchantIdKey, value: refund.merchantId },
        { key: modeKey, value: refund.mode },
      ],
      staticSummary: refundSummary(refund),
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}
