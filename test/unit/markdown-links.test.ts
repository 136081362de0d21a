import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkLinks, headingAnchors, linksIn } from '../../scripts/markdown-links';

describe('headingAnchors', () => {
  it("gives GitHub's slugs: lowercase, punctuation but - and _ dropped, spaces as -", async () => {
    const anchors = await headingAnchors('# Operations: alerts & runbooks\n\n## Snake_case and kebab-case (v2.0)\n');
    expect([...anchors]).toEqual(['operations-alerts--runbooks', 'snake_case-and-kebab-case-v20']);
  });

  it('takes the text of code spans and links, not their markup or targets', async () => {
    const anchors = await headingAnchors(
      '## Partner API (`npm run bench:partner`)\n\n## Retiring the old `deliveryWorkflow` type\n\n### See [the docs](other.md#x)\n',
    );
    expect([...anchors]).toEqual([
      'partner-api-npm-run-benchpartner',
      'retiring-the-old-deliveryworkflow-type',
      'see-the-docs',
    ]);
  });

  it('numbers repeated headings -1, -2 in document order, setext headings included', async () => {
    const anchors = await headingAnchors('## History\n\n## History\n\nHistory\n-------\n');
    expect([...anchors]).toEqual(['history', 'history-1', 'history-2']);
  });

  it('finds no heading in a code block', async () => {
    expect([...(await headingAnchors('```sh\n# a comment\n```\n'))]).toEqual([]);
  });
});

describe('linksIn', () => {
  it('finds links, images and reference links with their line, none in code', () => {
    const source = [
      'See [ops](docs/operations.md#releasing) and ![shot](docs/a.png).',
      '',
      '`[not](a-link.md)`',
      '',
      '```md',
      '[not](either.md)',
      '```',
      '',
      '| a | b |',
      '|---|---|',
      '| [in a table](t.md) | x |',
      '',
      'A [reference][r].',
      '',
      '[r]: ref.md',
    ].join('\n');
    expect(linksIn(source)).toEqual([
      { href: 'docs/operations.md#releasing', line: 1 },
      { href: 'docs/a.png', line: 1 },
      { href: 't.md', line: 11 },
      { href: 'ref.md', line: 13 },
    ]);
  });
});

describe('checkLinks', () => {
  let root: string;

  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'links-'));
    mkdirSync(join(root, 'docs'));
    writeFileSync(join(root, 'docs', 'guide.md'), '# Guide\n\n## Verifying webhooks\n\n## Verifying webhooks\n');
    writeFileSync(join(root, 'docs', 'shot.png'), '');
    writeFileSync(
      join(root, 'README.md'),
      [
        '# Readme',
        '[ok](docs/guide.md) [ok](docs/guide.md#verifying-webhooks-1) [ok](./docs/shot.png) [ok](#readme)',
        '[ok](/docs/guide.md#guide) [ok](https://example.com/x.md#nowhere) [ok](mailto:a@b.c)',
        '',
        '[no file](docs/missing.md)',
        '',
        '[no heading](docs/guide.md#verifying-webhooks-2)',
        '',
        '[no heading here](#nowhere)',
        '',
        '[outside](../shared/spec.md)',
      ].join('\n'),
    );
  });

  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('reports missing files and headings by file and line, and lists links that leave the root', async () => {
    const { broken, outside } = await checkLinks(root, ['README.md']);
    expect(broken).toEqual([
      { file: 'README.md', line: 5, href: 'docs/missing.md', problem: 'no file docs/missing.md' },
      {
        file: 'README.md',
        line: 7,
        href: 'docs/guide.md#verifying-webhooks-2',
        problem: 'no heading #verifying-webhooks-2 in docs/guide.md',
      },
      { file: 'README.md', line: 9, href: '#nowhere', problem: 'no heading #nowhere in README.md' },
    ]);
    expect(outside).toEqual([{ file: 'README.md', line: 11, href: '../shared/spec.md' }]);
  });

  it('resolves a link relative to the file it is in', async () => {
    writeFileSync(
      join(root, 'docs', 'other.md'),
      '[up](../README.md#readme) [here](guide.md) [wrong](docs/guide.md)\n',
    );
    const { broken } = await checkLinks(root, ['docs/other.md']);
    expect(broken.map((b) => b.href)).toEqual(['docs/guide.md']);
  });
});
