import { spawnSync } from 'node:child_process';
import { copyFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { SCREENSHOTS } from '../test/e2e/browser';
import { repoRoot } from './processes';

/**
 * `npm run screenshot:console`: re-takes the console's screenshots in the README. Runs the
 * console's browser tests through `npm test` with `TEST_CHECKS=jest` (jest alone, on
 * DATABASE_URL's Postgres or an embedded one, Chromium installed from Debian when missing), which
 * save the pages they shoot under test/e2e/screenshots/, then copies the README's ones to
 * docs/screenshots/. Fails, copying nothing, when a test fails or one of them was not taken by
 * this run.
 */

/** The README's console screenshots, as the tests name them (`console-<lang>-<page>-<width>`). */
const README_SHOTS = [
  'console-en-orders-phone',
  'console-ku-integrations-desktop',
  'console-en-endpoint-failed-desktop',
  'console-ar-payment-phone',
  'console-en-verify-passkey-phone',
  'console-en-order-shipped-phone',
] as const;

/** The browser tests that take them. */
const TESTS = ['test/e2e/console-seller.test.ts', 'test/e2e/console-merchant.test.ts', 'test/e2e/console-axe.test.ts'];

const DOCS = join(repoRoot, 'docs', 'screenshots');

function main(): number {
  const started = Date.now();
  const run = spawnSync(process.execPath, [join(repoRoot, 'scripts', 'bootstrap.js'), 'test', ...TESTS], {
    cwd: repoRoot,
    stdio: 'inherit',
    env: { ...process.env, TEST_CHECKS: 'jest' },
  });
  if (run.status !== 0) {
    process.stderr.write(
      `\nThe console's browser tests failed (exit ${run.status}); docs/screenshots/ is unchanged.\n`,
    );
    return run.status ?? 1;
  }
  const taken = (name: string) => {
    try {
      return statSync(join(SCREENSHOTS, `${name}.png`)).mtimeMs >= started;
    } catch {
      return false;
    }
  };
  const missing = README_SHOTS.filter((name) => !taken(name));
  if (missing.length > 0) {
    process.stderr.write(`\nThe tests did not take ${missing.join(', ')}; docs/screenshots/ is unchanged.\n`);
    return 1;
  }
  for (const name of README_SHOTS) copyFileSync(join(SCREENSHOTS, `${name}.png`), join(DOCS, `${name}.png`));
  process.stdout.write(
    `\nCopied ${README_SHOTS.length} screenshots to docs/screenshots/: ${README_SHOTS.join(', ')}\n`,
  );
  return 0;
}

process.exit(main());
