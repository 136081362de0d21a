import { Html, html, jsonScript } from '../html';
import { Lang, langInfo, langs, t } from '../i18n';
import { assetUrl } from '../static-assets';

/** What the pages show of the merchant (the public session's `merchant`). */
export interface MerchantBrand {
  display_name: string;
  logo_url: string | null;
  accent: string | null;
}

/** Everything around a page's content. */
export interface Frame {
  lang: Lang;
  title: string;
  /** The CSP nonce of this response (for the accent colour's style block). */
  nonce: string;
  merchant?: MerchantBrand | null;
  /** False shows the test-mode badge. */
  livemode?: boolean;
  /** The same page in another language (the switch's links); no switch when absent. */
  langHref?: (lang: Lang) => string;
  /** Data for the page script, in a JSON block; no script when absent. */
  script?: { page: 'checkout' | 'return' | 'gateway'; data: unknown };
  /** Reloads the page after this many seconds when scripts do not run. */
  noscriptRefreshSeconds?: number;
}

const DEFAULT_ACCENT = '#0f766e';

/** A merchant's accent as a CSS colour (hex only, so it can be put in a style block) or the default. */
function accentOf(accent: string | null | undefined): string {
  return accent && /^#(?:[0-9a-fA-F]{3}){1,2}$/.test(accent) ? accent : DEFAULT_ACCENT;
}

/** Black or white, whichever reads better on `hex` (WCAG relative luminance). */
export function textOn(hex: string): '#000000' | '#ffffff' {
  const full = hex.length === 4 ? hex.replace(/^#(.)(.)(.)$/, '#$1$1$2$2$3$3') : hex;
  const channel = (i: number) => {
    const c = parseInt(full.slice(1 + 2 * i, 3 + 2 * i), 16) / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  const luminance = 0.2126 * channel(0) + 0.7152 * channel(1) + 0.0722 * channel(2);
  // Contrast with white is 1.05 / (L + 0.05), with black (L + 0.05) / 0.05: take the larger.
  return 1.05 / (luminance + 0.05) >= (luminance + 0.05) / 0.05 ? '#ffffff' : '#000000';
}

/** A logo address the page may load: https only (the page never loads plain-http content). */
const safeLogo = (url: string | null | undefined) => (url && /^https:\/\/[^\s"'<>]+$/i.test(url) ? url : null);

function header(frame: Frame): Html {
  const m = frame.merchant;
  const logo = safeLogo(m?.logo_url);
  return html`<header class="top">
    <div class="top-inner">
      <div class="brand">
        ${logo && html`<img class="logo" src="${logo}" alt="" width="40" height="40" />`}
        ${m && html`<span class="merchant-name">${m.display_name}</span>`}
        ${frame.livemode === false && html`<span class="badge">${t(frame.lang, 'test_mode')}</span>`}
      </div>
      ${frame.langHref && languageSwitch(frame.lang, frame.langHref)}
    </div>
  </header>`;
}

function languageSwitch(current: Lang, href: (lang: Lang) => string): Html {
  return html`<nav class="langs" aria-label="${t(current, 'language')}">
    <ul>
      ${langs.map(
        (l) =>
          html`<li>
            <a
              href="${href(l)}"
              lang="${langInfo[l].tag}"
              hreflang="${langInfo[l].tag}"
              ${l === current ? html`aria-current="true"` : ''}
              >${t(l, 'lang_name')}</a
            >
          </li>`,
      )}
    </ul>
  </nav>`;
}

/** A whole page: head, the merchant's header, `content`, and the page script with its data. */
export function page(frame: Frame, content: Html): Html {
  const { tag, dir } = langInfo[frame.lang];
  const accent = accentOf(frame.merchant?.accent);
  return html`<!doctype html>
    <html lang="${tag}" dir="${dir}">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="referrer" content="same-origin" />
        <meta name="robots" content="noindex" />
        <title>${frame.title}${frame.merchant ? ` · ${frame.merchant.display_name}` : ''}</title>
        <link rel="stylesheet" href="${assetUrl('checkout.css')}" />
        <style nonce="${frame.nonce}">
          :root {
            --accent: ${accent};
            --on-accent: ${textOn(accent)};
          }
        </style>
        ${
          frame.noscriptRefreshSeconds !== undefined &&
          html`<noscript><meta http-equiv="refresh" content="${frame.noscriptRefreshSeconds}" /></noscript>`
        }
      </head>
      <body>
        ${header(frame)}
        <main id="main" class="main">${content}</main>
        ${
          frame.script &&
          html`<script type="application/json" id="page-data">
              ${jsonScript({ page: frame.script.page, ...(frame.script.data as object) })}
            </script>
            <script src="${assetUrl('checkout.js')}" defer></script>`
        }
      </body>
    </html> `;
}

/** A one-message screen (expired, cancelled, confirmed…) with an optional action. */
export function screen(opts: {
  tone: 'ok' | 'info' | 'warn' | 'error';
  title: string;
  body: string | Html;
  action?: { href: string; label: string } | null;
  extra?: Html | null;
}): Html {
  const icon = { ok: '✓', info: 'i', warn: '!', error: '×' }[opts.tone];
  return html`<section class="screen screen-${opts.tone}" aria-labelledby="screen-title">
    <div class="screen-icon" aria-hidden="true">${icon}</div>
    <h1 id="screen-title" tabindex="-1">${opts.title}</h1>
    <p class="screen-body">${opts.body}</p>
    ${opts.extra} ${opts.action && html`<a class="button primary" href="${opts.action.href}">${opts.action.label}</a>`}
  </section>`;
}
