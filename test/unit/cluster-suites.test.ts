import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CLUSTER_SUITES, DEV_SERVER_ONLY_SUITES } from '../../scripts/cluster/suites';
import { repoRoot } from '../../scripts/processes';

/**
 * `npm run test:cluster` runs every integration suite that uses a real Temporal server: those that
 * start one (`startTestDevServer`) or ask a stack for one (`temporal: 'dev-server'`), except the
 * ones that ask for the dev server's Web UI (`webUi: true`).
 */
const dir = join(repoRoot, 'test', 'integration');
const suites = readdirSync(dir)
  .filter((file) => file.endsWith('.test.ts'))
  .map((file) => ({ path: `test/integration/${file}`, text: readFileSync(join(dir, file), 'utf8') }));
const realServer = suites.filter((s) => /startTestDevServer\(|temporal: 'dev-server'/.test(s.text));

it('lists every integration suite that uses a real Temporal server and runs on the cluster', () => {
  const onCluster = realServer.filter((s) => !/webUi: true/.test(s.text)).map((s) => s.path);
  expect(onCluster.length).toBeGreaterThan(0);
  expect([...CLUSTER_SUITES].sort()).toEqual(onCluster.sort());
});

it('names the real-server suites that keep a dev server for its Web UI', () => {
  const withUi = realServer.filter((s) => /webUi: true/.test(s.text)).map((s) => s.path);
  expect([...DEV_SERVER_ONLY_SUITES].sort()).toEqual(withUi.sort());
});
