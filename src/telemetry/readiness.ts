import type { WorkflowService } from '@temporalio/client';
import type { Db } from '../db/knex';
import { missingSearchAttributes, type OperatorConnection } from '../temporal/search-attribute-setup';
import { withDeadline, type ReadinessCheck } from './metrics';

/** How long one readiness check may take before it counts as failed. */
const CHECK_TIMEOUT_MS = 2000;

const failed = (name: string, err: unknown): ReadinessCheck => ({
  name,
  ok: false,
  detail: err instanceof Error ? err.message : String(err),
});

/** Postgres answers a trivial statement. */
async function postgresReady(db: Db): Promise<ReadinessCheck> {
  try {
    await withDeadline('postgres', CHECK_TIMEOUT_MS, () => db.raw('SELECT 1'));
    return { name: 'postgres', ok: true };
  } catch (err) {
    return failed('postgres', err);
  }
}

/** Temporal answers on `connection`, and `namespace` has every custom search attribute (which starts and wakes need). */
async function temporalReady(
  connection: OperatorConnection & { workflowService: WorkflowService },
  namespace: string,
): Promise<ReadinessCheck[]> {
  try {
    await withDeadline('temporal', CHECK_TIMEOUT_MS, () => connection.workflowService.getSystemInfo({}));
  } catch (err) {
    return [failed('temporal', err)];
  }
  try {
    const missing = await withDeadline('search attributes', CHECK_TIMEOUT_MS, () =>
      missingSearchAttributes(connection, namespace),
    );
    const attributes: ReadinessCheck =
      missing === null
        ? { name: 'search_attributes', ok: true, detail: 'not checked: no operator rights to list them' }
        : missing.length
          ? { name: 'search_attributes', ok: false, detail: `namespace ${namespace} lacks ${missing.join(', ')}` }
          : { name: 'search_attributes', ok: true };
    return [{ name: 'temporal', ok: true }, attributes];
  } catch (err) {
    return [{ name: 'temporal', ok: true }, failed('search_attributes', err)];
  }
}

/** What every process needs to serve: Postgres, and Temporal on `connection` (undefined while it is still connecting). */
export async function serviceReady(
  db: Db,
  connection: (OperatorConnection & { workflowService: WorkflowService }) | undefined,
  namespace: string,
): Promise<ReadinessCheck[]> {
  const [postgres, temporal] = await Promise.all([
    postgresReady(db),
    connection ? temporalReady(connection, namespace) : [{ name: 'temporal', ok: false, detail: 'connecting' }],
  ]);
  return [postgres, ...temporal];
}

/** The worker polls its task queues (state RUNNING). */
export function workerReady(worker: { getState(): string } | undefined): ReadinessCheck {
  const state = worker?.getState() ?? 'INITIALIZED';
  return state === 'RUNNING' ? { name: 'worker', ok: true } : { name: 'worker', ok: false, detail: `worker ${state}` };
}
