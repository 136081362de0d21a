import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { checkLinks } from './markdown-links';
import { repoRoot } from './processes';

/**
 * Part of `npm test`: fails when a relative link or image in README.md, CHANGELOG.md or a Markdown
 * file under docs/ does not resolve: its file is missing or, for `file.md#anchor`, that file has no
 * heading with that anchor (GitHub's slugs). Links with a scheme (https:, mailto:) are not
 * followed; links that leave the repository (the contract in ../shared) are listed, not checked,
 * since a clone elsewhere does not have them. Offline, well under a second.
 */

const files = [
  'README.md',
  'CHANGELOG.md',
  ...readdirSync(join(repoRoot, 'docs'), { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.md'))
    .map((name) => join('docs', name))
    .sort(),
];

async function main(): Promise<number> {
  const { broken, outside } = await checkLinks(repoRoot, files);
  for (const link of outside) {
    process.stdout.write(`not checked (outside the repository): ${link.file}:${link.line} ${link.href}\n`);
  }
  for (const link of broken) {
    process.stderr.write(`${link.file}:${link.line}: ${link.href}: ${link.problem}\n`);
  }
  process.stdout.write(
    `links: ${files.length} files, ${broken.length} broken, ${outside.length} outside the repository\n`,
  );
  return broken.length === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`check-links failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
