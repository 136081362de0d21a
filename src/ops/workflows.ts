import { Client, WorkflowNotFoundError } from '@temporalio/client';
import type { Settings } from '../config';
import { refundWorkflowId } from '../temporal/refund';
import { sessionWorkflowId } from '../temporal/session';
import { OpsError } from './errors';

/** Which workflow an operator asks about, by the business id they know. */
export type WorkflowTarget = { session: string } | { endpoint: string } | { refund: string };

/** What `ops workflow show` prints about a workflow. */
export interface WorkflowView {
  workflow_id: string;
  run_id: string;
  type: string;
  status: string;
  task_queue: string;
  started_at: string;
  closed_at: string | null;
  history_length: number;
  summary: string | null;
  details: string | null;
  /** What the workflow says it waits for now (its current details); null once it is closed. */
  current_details: string | null;
  search_attributes: Record<string, string>;
  ui_url: string;
}

const idPatterns = {
  session: /^cs_(test_)?[0-9A-Za-z]+$/,
  endpoint: /^we_(test_)?[0-9A-Za-z]+$/,
  refund: /^re_(test_)?[0-9A-Za-z]+$/,
} as const;

const workflowIds = { session: sessionWorkflowId, endpoint: (id: string) => id, refund: refundWorkflowId } as const;

/** The workflow id of a target, from its workflow's contract. */
function workflowIdOf(target: WorkflowTarget): string {
  const [kind, id] = Object.entries(target)[0] as [keyof typeof idPatterns, string];
  if (!idPatterns[kind].test(id)) throw new OpsError('invalid_id', `"${id}" is not a ${kind} id`);
  return workflowIds[kind](id);
}

/** The workflow's link in the Temporal Web UI. */
export function workflowUiUrl(settings: Settings, workflowId: string, runId: string): string {
  const base = settings.TEMPORAL_UI_URL.replace(/\/+$/, '');
  const ns = encodeURIComponent(settings.TEMPORAL_NAMESPACE);
  return `${base}/namespaces/${ns}/workflows/${encodeURIComponent(workflowId)}/${encodeURIComponent(runId)}/history`;
}

/** Reads a workflow's description, its summaries and, while it runs, its current details (a worker answers). */
export async function showWorkflow(
  temporal: Client,
  settings: Settings,
  target: WorkflowTarget,
): Promise<WorkflowView> {
  const workflowId = workflowIdOf(target);
  const handle = temporal.workflow.getHandle(workflowId);
  let d: Awaited<ReturnType<typeof handle.describe>>;
  try {
    d = await handle.describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw new OpsError('not_found', `no workflow ${workflowId}`);
    throw err;
  }
  const running = d.status.name === 'RUNNING';
  return {
    workflow_id: d.workflowId,
    run_id: d.runId,
    type: d.type,
    status: d.status.name,
    task_queue: d.taskQueue,
    started_at: d.startTime.toISOString(),
    closed_at: d.closeTime?.toISOString() ?? null,
    history_length: d.historyLength,
    summary: (await d.staticSummary()) ?? null,
    details: (await d.staticDetails()) ?? null,
    current_details: running ? await currentDetails(handle) : null,
    search_attributes: Object.fromEntries(
      d.typedSearchAttributes.getAll().map(({ key, value }) => [key.name, String(value)]),
    ),
    ui_url: workflowUiUrl(settings, d.workflowId, d.runId),
  };
}

/** The workflow's current details through the built-in metadata query; null when no worker answers in time. */
async function currentDetails(handle: ReturnType<Client['workflow']['getHandle']>): Promise<string | null> {
  try {
    const metadata = await Promise.race([
      handle.query<{ currentDetails?: string }>('__temporal_workflow_metadata'),
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no worker answered')), 5000).unref()),
    ]);
    return metadata.currentDetails || null;
  } catch {
    return null;
  }
}
