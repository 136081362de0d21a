import { existsSync, readFileSync } from 'node:fs';
import { dirname, extname, isAbsolute, join, relative, resolve } from 'node:path';
import MarkdownIt from 'markdown-it';

/** Relative links in Markdown files, and whether each resolves: its file exists and, into a Markdown file, its heading. */

const markdown = new MarkdownIt({ html: true });
/** github-slugger is ESM only; this CommonJS module loads it with import(). */
const slugger = import('github-slugger').then((module) => module.default);

/** A link or image as written in a Markdown file. */
export interface Link {
  /** The target as written, e.g. `docs/operations.md#releasing`. */
  href: string;
  /** 1-based line of the paragraph, table row or heading the link is in. */
  line: number;
}

/** A link that does not resolve, with what is missing. */
export interface BrokenLink extends Link {
  /** The file the link is in, relative to the root. */
  file: string;
  problem: string;
}

/** The anchors GitHub gives a document's headings: github-slugger over each heading's text, duplicates numbered -1, -2, … */
export async function headingAnchors(source: string): Promise<Set<string>> {
  const slugs = new (await slugger)();
  const tokens = markdown.parse(source, {});
  const anchors = new Set<string>();
  tokens.forEach((token, i) => {
    if (token.type !== 'heading_open') return;
    // The heading's text as GitHub renders it: text and code spans, without markup, links' targets or HTML tags.
    const text = (tokens[i + 1].children ?? [])
      .filter((child) => child.type === 'text' || child.type === 'code_inline')
      .map((child) => child.content)
      .join('');
    anchors.add(slugs.slug(text));
  });
  return anchors;
}

/** Every link and image target in a document, with its line; code blocks and code spans hold none. */
export function linksIn(source: string): Link[] {
  const links: Link[] = [];
  let line = 1;
  for (const block of markdown.parse(source, {})) {
    // A table cell's text has no line of its own; its row (tr_open) has.
    if (block.map) line = block.map[0] + 1;
    if (block.type !== 'inline') continue;
    for (const child of block.children ?? []) {
      const href =
        child.type === 'link_open' ? child.attrGet('href') : child.type === 'image' ? child.attrGet('src') : null;
      if (typeof href === 'string') links.push({ href, line });
    }
  }
  return links;
}

/** Whether a target leaves the repository's files: a URL with a scheme (https:, mailto:) or a protocol-relative one. */
function isExternal(href: string): boolean {
  return /^[a-z][a-z0-9+.-]*:/i.test(href) || href.startsWith('//');
}

/** What the relative links of `files` (paths relative to `root`) point at that does not exist, and the links that leave `root`. */
export async function checkLinks(
  root: string,
  files: string[],
): Promise<{ broken: BrokenLink[]; outside: (Link & { file: string })[] }> {
  const broken: BrokenLink[] = [];
  const outside: (Link & { file: string })[] = [];
  const anchorCache = new Map<string, Set<string>>();
  const anchorsOf = async (path: string): Promise<Set<string>> => {
    let anchors = anchorCache.get(path);
    if (!anchors) anchorCache.set(path, (anchors = await headingAnchors(readFileSync(path, 'utf8'))));
    return anchors;
  };

  for (const file of files) {
    const source = join(root, file);
    for (const link of linksIn(readFileSync(source, 'utf8'))) {
      if (isExternal(link.href)) continue;
      const hash = link.href.indexOf('#');
      const pathPart = decodeURI(hash < 0 ? link.href : link.href.slice(0, hash));
      const anchor = hash < 0 ? undefined : decodeURIComponent(link.href.slice(hash + 1));
      // As on GitHub: a path from / starts at the repository's root; an empty path is the file itself.
      const target =
        pathPart === '' ? source : pathPart.startsWith('/') ? join(root, pathPart) : resolve(dirname(source), pathPart);
      const fromRoot = relative(root, target);
      if (fromRoot.startsWith('..') || isAbsolute(fromRoot)) {
        outside.push({ ...link, file });
        continue;
      }
      if (!existsSync(target)) {
        broken.push({ ...link, file, problem: `no file ${fromRoot}` });
      } else if (anchor !== undefined && extname(target) === '.md' && !(await anchorsOf(target)).has(anchor)) {
        broken.push({ ...link, file, problem: `no heading #${anchor} in ${fromRoot}` });
      }
    }
  }
  return { broken, outside };
}
