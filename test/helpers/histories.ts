import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import type { Stack } from './stack';

/**
 * The variable `npm run histories:record` sets to a directory: the tests that drive a workflow
 * branch then keep its history there, as JSON in the Temporal CLI's and UI's export format. Unset
 * (an ordinary `npm test`), keeping a history does nothing.
 */
export const RECORD_HISTORIES_DIR = 'RECORD_HISTORIES_DIR';

/**
 * Keeps the history of `workflowId` as `<dir>/<name>.json` when recording. A workflow that continued
 * as new is kept run by run, oldest first (`<name>.run-1.json`, …; only the first `firstRuns`), so
 * the continue-as-new command and the start from carried state both replay.
 */
export async function keepHistory(
  stack: Stack,
  workflowId: string,
  name: string,
  { firstRuns = Infinity }: { firstRuns?: number } = {},
): Promise<void> {
  const dir = process.env[RECORD_HISTORIES_DIR];
  if (!dir) return;
  await new Promise((resolve) => setTimeout(resolve, 500)); // the worker's last task completes
  const client = stack.env.client.workflow;
  const runs = [await client.getHandle(workflowId).fetchHistory()];
  for (;;) {
    const started = runs[0].events?.[0]?.workflowExecutionStartedEventAttributes;
    const previous = started?.continuedExecutionRunId;
    if (!previous) break;
    runs.unshift(await client.getHandle(workflowId, previous).fetchHistory());
  }
  const chained = runs.length > 1;
  runs.slice(0, firstRuns).forEach((history, i) => {
    const file = join(dir, chained ? `${name}.run-${i + 1}.json` : `${name}.json`);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, `${JSON.stringify(JSON.parse(historyToJSON(history)), null, 2)}\n`);
  });
}
