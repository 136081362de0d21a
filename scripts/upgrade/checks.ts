import { Client as PgClient } from 'pg';
import type { Client as TemporalClient } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import type { Balancer } from './fleet';
import type { LoadMerchant } from './load';

/** The longest lock wait seen in one phase: who waited, on whom, doing what. */
export interface LockWait {
  ms: number;
  waiter: string;
  blockers: string;
  query: string;
}

/**
 * Samples Postgres's lock queue every `everyMs` on a connection of its own: for each phase and for
 * each migration the longest time any backend of the run's database has waited for a lock
 * (`pg_locks.waitstart`), with the application names of the waiter and of what blocks it (every
 * process of the run names itself; the migration runner names each connection after its migration).
 */
export async function startLockSampler(databaseUrl: string, phaseOf: () => string, everyMs = 25) {
  const client = new PgClient({ connectionString: databaseUrl, application_name: 'bench-lock-sampler' });
  client.on('error', () => undefined);
  await client.connect();
  const longest = new Map<string, LockWait>();
  const byMigration = new Map<string, LockWait>();
  let running = true;
  const loop = (async () => {
    while (running) {
      try {
        const { rows } = await client.query<{ ms: number; waiter: string; blockers: string | null; query: string }>(
          `SELECT extract(epoch FROM clock_timestamp() - l.waitstart) * 1000 AS ms,
                  a.application_name AS waiter,
                  (SELECT string_agg(DISTINCT b.application_name, ',') FROM pg_stat_activity b
                    WHERE b.pid = ANY(pg_blocking_pids(l.pid))) AS blockers,
                  left(regexp_replace(a.query, '\\s+', ' ', 'g'), 140) AS query
             FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
            WHERE NOT l.granted AND l.waitstart IS NOT NULL AND a.datname = current_database()
            ORDER BY 1 DESC LIMIT 20`,
        );
        const phase = phaseOf();
        for (const row of rows) {
          const wait = { ms: Number(row.ms), waiter: row.waiter, blockers: row.blockers ?? '', query: row.query };
          if (wait.ms > (longest.get(phase)?.ms ?? 0)) longest.set(phase, wait);
          // The runner names its connections `<app>:<migration>`: a wait of, or behind, a migration is its own.
          for (const name of migrationsIn(`${wait.waiter},${wait.blockers}`))
            if (wait.ms > (byMigration.get(name)?.ms ?? 0)) byMigration.set(name, wait);
        }
      } catch {
        // A sample lost (the server busy or restarting) is not a finding.
      }
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
  return {
    /** Per phase. */
    longest,
    /** Per migration: the longest wait of its connections, or of anything its connections blocked. */
    byMigration,
    async stop() {
      running = false;
      await loop;
      await client.end();
    },
  };
}

/** The migrations named in a list of application names (`migrate-0.2.0:20261127120000_delivery_tenant_drop`). */
function migrationsIn(applications: string): string[] {
  return [...applications.matchAll(/migrate[^:,]*:([0-9]{14}_[a-z0-9_]+)/g)].map((m) => m[1]);
}

/** A workflow task that failed: the workflow, and why. */
export interface TaskFailure {
  workflowId: string;
  type: string;
  cause: string;
  message: string;
}

/**
 * Every workflow task failure in every history of the namespace (the bench's own dev server: all
 * of them are the run's), the count of workflow tasks that timed out (a worker stopped with a
 * task on its sticky queue: the server gives the task to another worker, no failure), and which
 * runs mark which patches.
 */
export async function workflowTaskFailures(client: TemporalClient): Promise<{
  workflows: number;
  failures: TaskFailure[];
  timeouts: number;
  /** Per patch id, the start times (ms) of the runs whose history marks it. */
  marked: Map<string, number[]>;
}> {
  const failures: TaskFailure[] = [];
  const marked = new Map<string, number[]>();
  let workflows = 0;
  let timeouts = 0;
  const types = temporal.api.enums.v1.EventType;
  const causes = temporal.api.enums.v1.WorkflowTaskFailedCause;
  for await (const execution of client.workflow.list()) {
    workflows++;
    const history = await client.workflow.getHandle(execution.workflowId, execution.runId).fetchHistory();
    for (const event of history.events ?? []) {
      if (event.eventType === types.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT) timeouts++;
      const patch = event.markerRecordedEventAttributes?.details?.['patch-data']?.payloads?.[0]?.data;
      if (patch) {
        const id = (JSON.parse(Buffer.from(patch).toString('utf8')) as { id: string }).id;
        marked.set(id, [...(marked.get(id) ?? []), execution.startTime.getTime()]);
      }
      if (event.eventType !== types.EVENT_TYPE_WORKFLOW_TASK_FAILED) continue;
      const attrs = event.workflowTaskFailedEventAttributes;
      failures.push({
        workflowId: execution.workflowId,
        type: execution.type,
        cause: causes[attrs?.cause ?? 0] ?? String(attrs?.cause),
        message: (attrs?.failure?.message ?? '').slice(0, 300),
      });
    }
  }
  return { workflows, failures, timeouts, marked };
}

export interface ListedEvent {
  merchant: number;
  id: string;
  type: string;
  objectId: string;
}

/** Every event of every merchant, through `GET /v1/events`, page by page. */
export async function listEvents(balancer: Balancer, merchants: LoadMerchant[]): Promise<ListedEvent[]> {
  const events: ListedEvent[] = [];
  for (const m of merchants) {
    let cursor: string | null = null;
    do {
      const query: string = cursor ? `?limit=100&cursor=${encodeURIComponent(cursor)}` : '?limit=100';
      const page = await balancer.request('GET', `/v1/events${query}`, { authorization: `Bearer ${m.secretKey}` });
      if (page.status !== 200) throw new Error(`GET /v1/events: ${page.status} ${page.text}`);
      const body = JSON.parse(page.text) as {
        data: Array<{ id: string; type: string; data: { object: { id: string } } }>;
        next_cursor: string | null;
      };
      for (const e of body.data) events.push({ merchant: m.index, id: e.id, type: e.type, objectId: e.data.object.id });
      cursor = body.next_cursor;
    } while (cursor);
  }
  return events;
}
