import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { repoRoot } from '../../scripts/processes';

// `UPGRADE_PAIR=fixture npm run bench:upgrade` (CI) builds its release from this patch: a change to
// the files it touches must keep it applying (regenerate it as its header in docs/operations.md says).
describe('the fixture release of bench:upgrade', () => {
  it('applies to the working tree', () => {
    const patch = join(repoRoot, 'scripts', 'upgrade', 'fixture-release.patch');
    const check = spawnSync('git', ['apply', '--check', patch], { cwd: repoRoot, encoding: 'utf8' });
    expect(check.stderr).toBe('');
    expect(check.status).toBe(0);
  });
});
