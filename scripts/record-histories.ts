import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, relative } from 'node:path';
import { RECORD_HISTORIES_DIR } from '../test/helpers/histories';
import { repoRoot } from './processes';

/**
 * `npm run histories:record [label]`: runs the integration tests that drive every workflow branch
 * (through `npm test`, so on the same Postgres and time-skipping server) with RECORD_HISTORIES_DIR
 * set; each keeps its workflow's history under test/replay/histories/<label>/<workflow>/<branch>.json.
 * The label defaults to today's date and the commit the workflow code comes from. Histories of
 * earlier labels stay: `npm run replay` replays them all against the current code.
 */
const RECORDING_TESTS = [
  'test/integration/checkout-sessions-expiry.test.ts',
  'test/integration/checkout-attempts.test.ts',
  'test/integration/checkout-attempts-timing.test.ts',
  'test/integration/session-workflow.test.ts',
  'test/integration/checkout-public.test.ts',
  'test/integration/checkout-refunds.test.ts',
  'test/integration/webhooks-delivery.test.ts',
  'test/integration/webhooks-schedule.test.ts',
  'test/integration/webhooks-queue.test.ts',
  'test/integration/janitor.test.ts',
  'test/integration/test-helpers-fast-forward.test.ts',
  'test/integration/telemetry-tracing.test.ts',
];

function defaultLabel(): string {
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: repoRoot }).toString().trim();
  const dirty = execFileSync('git', ['status', '--porcelain', '--', 'workflows'], { cwd: repoRoot }).toString();
  return `${new Date().toISOString().slice(0, 10)}-${commit}${dirty.trim() ? '-dirty' : ''}`;
}

const label = process.argv[2] ?? defaultLabel();
const dir = join(repoRoot, 'test', 'replay', 'histories', label);
if (existsSync(dir)) {
  process.stderr.write(`${relative(repoRoot, dir)} exists already: remove it or pass another label.\n`);
  process.exit(2);
}
process.stdout.write(`Recording workflow histories into ${relative(repoRoot, dir)}\n`);
const result = spawnSync(process.execPath, [join('scripts', 'bootstrap.js'), 'test', ...RECORDING_TESTS], {
  cwd: repoRoot,
  stdio: 'inherit',
  env: { ...process.env, [RECORD_HISTORIES_DIR]: dir },
});
process.exit(result.status ?? 1);
