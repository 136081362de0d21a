import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { temporal } from '@temporalio/proto';
import { bundleWorkflowCode, DefaultLogger, makeTelemetryFilterString, Runtime, Worker } from '@temporalio/worker';
import { workerTracingOptions, workflowInterceptorModules } from '../src/telemetry/temporal';
import { repoRoot } from './processes';

/**
 * `npm run replay`: replays every committed workflow history (test/replay/histories, JSON as the
 * Temporal CLI and UI export it) against the current workflow code, with the tracing interceptors
 * every worker runs, with the SDK's replayer. Exits 1
 * on any nondeterminism, naming the workflow type, the history file and the event it diverged at;
 * `npm test` runs it.
 */
const historiesDir = join(repoRoot, 'test', 'replay', 'histories');

type History = temporal.api.history.v1.IHistory;

interface Recorded {
  file: string;
  history: History;
  workflowType: string;
}

/** Every `*.json` under `dir`, sorted, relative to the repository. */
function historyFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.json'))
    .map((name) => relative(repoRoot, join(dir, name)))
    .sort();
}

function load(file: string): Recorded {
  const history = historyFromJSON(JSON.parse(readFileSync(join(repoRoot, file), 'utf8')));
  const workflowType =
    history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name ?? '(unknown workflow)';
  return { file, history, workflowType };
}

/** The event a replay error names (`event id 7`, `HistoryEvent(id: 7, …)`), as `event 7 (TimerFired)`. */
function divergedAt(message: string, history: History): string {
  const id = /(?:event[ _]?id|HistoryEvent\(id)[:=]?\s*(\d+)/i.exec(message)?.[1];
  if (!id) return 'an event the error does not number';
  const event = history.events?.find((e) => String(e.eventId) === id);
  const type = event?.eventType == null ? '' : ` (${eventTypeName(event.eventType)})`;
  return `event ${id}${type}`;
}

function eventTypeName(type: number | string): string {
  const name = typeof type === 'number' ? temporal.api.enums.v1.EventType[type] : type;
  return (name ?? String(type)).replace(/^EVENT_TYPE_/, '');
}

async function main(): Promise<number> {
  // The replayer's own warnings repeat each failure; the lines below name them once.
  Runtime.install({
    logger: new DefaultLogger('ERROR'),
    telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'ERROR', other: 'ERROR' }) } },
  });
  const files = historyFiles(historiesDir);
  if (files.length === 0) {
    process.stderr.write(`replay: no histories under ${relative(repoRoot, historiesDir)}\n`);
    return 1;
  }
  const recorded = new Map(files.map((file) => [file, load(file)]));
  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve('../workflows'),
    workflowInterceptorModules, // the tracing interceptors, as every worker runs them
    logger: new DefaultLogger('WARN'),
  });
  const started = Date.now();
  const failures: string[] = [];
  const histories = [...recorded.values()].map(({ file, history }) => ({ workflowId: file, history }));
  for await (const result of Worker.runReplayHistories(
    { workflowBundle: { code }, replayName: 'replay', sinks: workerTracingOptions().sinks },
    histories,
  )) {
    if (!result.error) continue;
    const { file, history, workflowType } = recorded.get(result.workflowId)!;
    const message = result.error.message;
    failures.push(`${workflowType}: ${file}: diverged at ${divergedAt(message, history)}: ${message}`);
  }
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  for (const line of failures) process.stderr.write(`replay FAILED ${line}\n`);
  const byType = new Map<string, number>();
  for (const { workflowType } of recorded.values()) byType.set(workflowType, (byType.get(workflowType) ?? 0) + 1);
  const counts = [...byType].map(([type, n]) => `${type} ${n}`).join(', ');
  process.stdout.write(
    `replay: ${files.length - failures.length} of ${files.length} histories replayed (${counts}) in ${seconds}s\n`,
  );
  return failures.length === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`replay failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
