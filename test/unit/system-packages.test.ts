import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import ts from 'typescript';
import {
  ensureSystemPackages,
  findSystemBinary,
  packagesFor,
  SystemPackageMissing,
} from '../../scripts/system-packages';

const repo = resolve(__dirname, '..', '..');
const moduleSource = join(repo, 'scripts', 'system-packages.ts');

/** Every test file under test/, as absolute paths (what `jest --listTests` prints). */
function testFiles(dir = join(repo, 'test')): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return testFiles(path);
    return entry.name.endsWith('.test.ts') ? [path] : [];
  });
}

const names = (files: string[]) => packagesFor(files).map((pkg) => pkg.debian);

describe('system packages for the tests', () => {
  it('asks for chromium for the browser tests, prometheus for the telemetry tests, and nothing for the others', () => {
    expect(names([join(repo, 'test/e2e/checkout-pay.test.ts')])).toEqual(['chromium']);
    expect(names([join(repo, 'test/integration/temporal-ui.test.ts')])).toEqual(['chromium']);
    expect(names([join(repo, 'test/integration/telemetry-prometheus.test.ts')])).toEqual(['prometheus']);
    expect(names([join(repo, 'test/unit/lib.test.ts'), join(repo, 'test/integration/janitor.test.ts')])).toEqual([]);
  });

  it('asks for prometheus, alertmanager, iptables and faketime for npm run chaos, and of those only faketime for a test (the clock of dependency-probes)', () => {
    expect(names([join(repo, 'scripts/chaos.ts')])).toEqual([
      'prometheus',
      'prometheus-alertmanager',
      'iptables',
      'faketime',
    ]);
    expect(packagesFor(testFiles()).map((pkg) => pkg.debian)).toEqual(['chromium', 'prometheus', 'faketime']);
    expect(names([join(repo, 'test/integration/dependency-probes.test.ts')])).toEqual(['faketime']);
  });

  it('asks for faketime for every test file that preloads libfaketime', () => {
    const preloading = testFiles().filter((file) => /faketime[\/]libfaketime/.test(readFileSync(file, 'utf8')));
    expect(preloading.length).toBeGreaterThan(0);
    for (const file of preloading) expect({ file, packages: names([file]) }).toEqual({ file, packages: ['faketime'] });
  });

  it('asks for chromium for every test file that launches the browser', () => {
    const launching = testFiles().filter((file) =>
      /\blaunchBrowser\b|from '\.\/shop'/.test(readFileSync(file, 'utf8')),
    );
    expect(launching.length).toBeGreaterThan(3);
    for (const file of launching) expect({ file, packages: names([file]) }).toEqual({ file, packages: ['chromium'] });
  });

  it('finds a binary through its override variable only when that path is executable', () => {
    expect(findSystemBinary('chromium', { CHROMIUM_PATH: process.execPath, PATH: '' })).toBe(process.execPath);
    expect(findSystemBinary('chromium', { CHROMIUM_PATH: moduleSource, PATH: '' })).toBeUndefined();
    expect(findSystemBinary('node', { PATH: `/nonexistent:${resolve(process.execPath, '..')}` })).toBe(
      join(resolve(process.execPath, '..'), 'node'),
    );
  });

  it('names an override variable that points at no executable instead of installing anything', () => {
    const chromium = packagesFor([join(repo, 'test/e2e/checkout-pay.test.ts')]);
    expect(() => ensureSystemPackages(chromium, { ...process.env, CHROMIUM_PATH: '/nonexistent/chromium' })).toThrow(
      new SystemPackageMissing('CHROMIUM_PATH=/nonexistent/chromium is not an executable file.'),
    );
  });

  it('stops with the package and the command to run when it is missing and this user may not install', () => {
    // The module as plain JavaScript in a directory any user can read, run as `nobody` when we
    // are root, with a PATH that has apt-get but neither chromium nor sudo.
    const dir = mkdtempSync(join(tmpdir(), 'system-packages-'));
    try {
      const js = ts.transpileModule(readFileSync(moduleSource, 'utf8'), {
        compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
      }).outputText;
      const script = join(dir, 'system-packages.js');
      writeFileSync(script, js);
      chmodSync(dir, 0o755);
      chmodSync(script, 0o644);
      const scratchPath = mkdtempSync(join(tmpdir(), 'scratch-path-'));
      chmodSync(scratchPath, 0o755);
      symlinkSync(findSystemBinary('apt-get') ?? '/usr/bin/apt-get', join(scratchPath, 'apt-get'));
      const setpriv = findSystemBinary('setpriv') ?? 'setpriv';
      const asNobody = process.getuid?.() === 0 ? [setpriv, '--reuid=65534', '--regid=65534', '--clear-groups'] : [];
      const [command, ...args] = [...asNobody, process.execPath, script, 'chromium'];
      const result = spawnSync(command, args, { encoding: 'utf8', env: { PATH: scratchPath, HOME: dir }, cwd: dir });
      rmSync(scratchPath, { recursive: true, force: true });
      expect(result.status).toBe(1);
      expect(result.stdout).not.toContain('Installing');
      expect(result.stderr).toContain("npm test needs Debian's chromium (the browser tests");
      expect(result.stderr).toContain('this user is not root and `sudo -n` is not allowed');
      expect(result.stderr).toContain('sudo apt-get install -y chromium');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
