import { Html, html } from '../hosted/html';
import { Lang, langInfo, langs } from '../hosted/i18n';
import { assetUrl, type AssetName } from '../hosted/static-assets';
import type { ConsoleUser } from './accounts';
import { ct } from './messages';
import { allowed } from './roles';
import { CSRF_FIELD } from './security';

export interface ConsoleFrame {
  lang: Lang;
  title: string;
  /** The same page in another language. */
  langHref: (lang: Lang) => string;
  /** Signed in: the navigation and the sign-out form. */
  user?: ConsoleUser | null;
  csrf?: string;
  /** The path of the current section, for `aria-current`. */
  current?: string;
  /** Scripts of the page (files of ours, `'self'`: the CSP allows no inline script). */
  scripts?: AssetName[];
  /** The merchant pages' mode: a merchant's user sees the switch, and in test mode a banner on every page. */
  mode?: 'test' | 'live';
}

/** The hidden CSRF field every state-changing form carries. */
export const csrfField = (token: string): Html => html`<input type="hidden" name="${CSRF_FIELD}" value="${token}" />`;

/**
 * The attributes of a table's wrapper, which scrolls sideways when the table is wider than the
 * screen (a phone's): a region named `label` that keyboard users can focus to scroll it.
 */
export const scrollRegion = (label: string): Html =>
  html`class="table-wrap" role="region" tabindex="0" aria-label="${label}"`;

/** The test/live switch: a form post (the preference cookie), back to the same page. */
function modeSwitch(frame: ConsoleFrame): Html {
  const { lang } = frame;
  const other = frame.mode === 'live' ? 'test' : 'live';
  return html`<form method="post" action="/console/mode" class="inline">
    ${csrfField(frame.csrf ?? '')}
    <input type="hidden" name="mode" value="${other}" />
    <input type="hidden" name="next" value="${frame.current ?? '/console'}" />
    <button type="submit" class="link">${ct(lang, other === 'live' ? 'switch_to_live' : 'switch_to_test')}</button>
  </form>`;
}

function nav(frame: ConsoleFrame, user: ConsoleUser): Html {
  const { lang } = frame;
  const links: Array<[string, string]> = [];
  if (user.seller_id) {
    links.push(['/console/orders', ct(lang, 'nav_orders')]);
    links.push(['/console/products', ct(lang, 'nav_products')]);
    links.push(['/console/inventory', ct(lang, 'nav_inventory')]);
    links.push(['/console/settings/integrations', ct(lang, 'nav_integrations')]);
  }
  if (user.merchant_id) {
    links.push(['/console/payments', ct(lang, 'nav_payments')]);
    links.push(['/console/developers/webhooks', ct(lang, 'nav_webhooks')]);
    links.push(['/console/developers/keys', ct(lang, 'nav_api_keys')]);
    links.push(['/console/developers/events', ct(lang, 'nav_events')]);
  }
  if (allowed(user.role, 'users.manage')) links.push(['/console/settings/users', ct(lang, 'nav_users')]);
  if (allowed(user.role, 'audit.read')) links.push(['/console/audit', ct(lang, 'nav_audit')]);
  links.push(['/console/account/security', ct(lang, 'nav_security')]);
  links.push(['/console/account/sessions', ct(lang, 'nav_sessions')]);
  return html`<nav class="nav" aria-label="${ct(lang, 'console')}">
    <ul>
      ${links.map(
        ([href, label]) =>
          html`<li><a href="${href}" ${frame.current === href ? html`aria-current="page"` : ''}>${label}</a></li>`,
      )}
    </ul>
    ${user.merchant_id && modeSwitch(frame)}
    <form method="post" action="/console/sign-out" class="inline">
      ${csrfField(frame.csrf ?? '')}
      <button type="submit" class="link">${ct(lang, 'sign_out')}</button>
    </form>
  </nav>`;
}

/** A whole console page. */
export function consolePage(frame: ConsoleFrame, content: Html): Html {
  const { tag, dir } = langInfo[frame.lang];
  return html`<!doctype html>
    <html lang="${tag}" dir="${dir}">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="robots" content="noindex" />
        <title>${frame.title} · ${ct(frame.lang, 'console')}</title>
        <link rel="stylesheet" href="${assetUrl('console.css')}" />
        ${(frame.scripts ?? []).map((name) => html`<script src="${assetUrl(name)}" defer></script>`)}
      </head>
      <body>
        <a class="skip" href="#main">${ct(frame.lang, 'skip')}</a>
        <header class="top">
          <span class="brand">${ct(frame.lang, 'console')}</span>
          ${
            frame.user &&
            html`<span class="who"
              >${ct(frame.lang, 'signed_in_as', { email: frame.user.email, role: frame.user.role })}</span
            >`
          }
          <nav class="langs" aria-label="${ct(frame.lang, 'language')}">
            <ul>
              ${langs.map(
                (l) =>
                  html`<li>
                    <a
                      href="${frame.langHref(l)}"
                      lang="${langInfo[l].tag}"
                      hreflang="${langInfo[l].tag}"
                      ${l === frame.lang ? html`aria-current="true"` : ''}
                      >${ct(l, 'lang_name')}</a
                    >
                  </li>`,
              )}
            </ul>
          </nav>
        </header>
        ${frame.user && nav(frame, frame.user)}
        ${
          frame.user?.merchant_id &&
          frame.mode !== 'live' &&
          html`<p class="notice notice-error test-banner" role="status" id="test-mode-banner">
            ${ct(frame.lang, 'test_mode_banner')}
          </p>`
        }
        <main id="main" class="main">
          <h1>${frame.title}</h1>
          ${content}
        </main>
      </body>
    </html>`;
}

/** A notice above a page's content. */
export const notice = (tone: 'ok' | 'error', text: string | null | undefined): Html | null =>
  text ? html`<p class="notice notice-${tone}" role="${tone === 'error' ? 'alert' : 'status'}">${text}</p>` : null;
