import { Html, html } from '../hosted/html';
import type { Lang } from '../hosted/i18n';
import { iso } from '../lib/time';
import { ct } from './messages';

/** A key's "last used" cell (src/keys/last-used.ts: it moves at most once a minute), or "Never". */
export const lastUsedCell = (lang: Lang, at: Date | null): Html =>
  at
    ? html`<td class="mono key-last-used">${iso(at)}</td>`
    : html`<td class="key-last-used">${ct(lang, 'never_used')}</td>`;
