import type { Context } from 'koa';
import type { Html } from '../hosted/html';
import { html } from '../hosted/html';
import { LANG_COOKIE, readCookie, writeCookie } from '../hosted/cookies';
import { Lang, langOf } from '../hosted/i18n';
import type { Clock } from '../lib/clock';
import type { Db } from '../db/knex';
import type { AssetName } from '../hosted/static-assets';
import type { KeyMode } from '../keys/keys';
import type { SessionDeps } from '../checkout/sessions/deps';
import type { WebhookDeps } from '../webhooks/deps';
import type { SecretCipher } from '../webhooks/secret-crypto';
import { consolePage } from './layout';
import { ConsoleMessageKey, ct } from './messages';
import type { ConsoleSession } from './sessions';

/** What the console's handlers use. */
export interface ConsoleDeps {
  db: Db;
  clock: Clock;
  /** Encrypts TOTP secrets at rest (the service's secret key, as for webhook secrets). */
  cipher: SecretCipher;
  /** The console's origin (PUBLIC_BASE_URL's): the only Origin a state change may come from. */
  origin: string;
  /** The Partner API environment this process serves: a key made here is of its mode. */
  partnerEnvironment: 'sandbox' | 'live';
  /** A live Checkout key may be made (WEBHOOK_SECRET_KEY is set: secrets are not sealed with the public development key). */
  liveKeysAllowed: boolean;
  /** The webhook API's services' dependencies: merchant pages call the same services. */
  webhooks: WebhookDeps;
  /** The Checkout API's session and refund services' dependencies: the payments pages call the same services. */
  sessions: SessionDeps;
}

/** Per request, set by the stack's middleware. */
export interface ConsoleState {
  lang: Lang;
  session: ConsoleSession | null;
  /** The CSRF token for forms on this page (session-bound, or the pre-session cookie's). */
  csrf: string;
  form: URLSearchParams;
  /** The merchant pages' mode (the `__Host-console_mode` preference; test unless set to live). */
  mode: KeyMode;
}

export const stateOf = (ctx: Context): ConsoleState => ctx.state.console as ConsoleState;

/** `?lang=` (remembered), the remembered choice, the browser's first language we have, else Arabic. */
export function chooseLang(ctx: Context): Lang {
  const asked = typeof ctx.query.lang === 'string' ? langOf(ctx.query.lang) : null;
  if (asked) {
    writeCookie(ctx, LANG_COOKIE, asked, { maxAgeSeconds: 365 * 86_400, secure: true });
    return asked;
  }
  const remembered = langOf(readCookie(ctx, LANG_COOKIE));
  if (remembered) return remembered;
  for (const part of ctx.get('accept-language').split(',')) {
    const lang = langOf(part.split(';')[0]);
    if (lang) return lang;
  }
  return 'ar';
}

/**
 * The console page a form was posted from (the Referer, which the console's same-origin referrer
 * policy sends): after a POST the language links lead there, since an action's URL has no page
 * (a GET of it is 405) and a link must never repeat the post. Null when there is none of ours.
 */
function formPage(ctx: Context): { path: string; query: string } | null {
  try {
    const from = new URL(ctx.get('referer'));
    if (from.host !== ctx.host || !/^\/console(\/|$)/.test(from.pathname)) return null;
    return { path: from.pathname, query: from.search };
  } catch {
    return null;
  }
}

/** Renders a console page into `ctx`. */
export function render(
  ctx: Context,
  status: number,
  title: string,
  content: Html,
  current?: string,
  scripts?: AssetName[],
): void {
  const state = stateOf(ctx);
  const langHref = (lang: Lang) => {
    const { path, query } =
      ctx.method === 'POST'
        ? (formPage(ctx) ?? { path: '/console', query: '' })
        : { path: ctx.path, query: ctx.querystring };
    const params = new URLSearchParams(query);
    params.set('lang', lang);
    return `${path}?${params.toString()}`;
  };
  const session = state.session?.complete ? state.session : null;
  ctx.status = status;
  ctx.type = 'text/html; charset=utf-8';
  ctx.body = consolePage(
    {
      lang: state.lang,
      title,
      langHref,
      user: session?.user ?? null,
      csrf: state.csrf,
      current,
      scripts,
      mode: state.mode,
    },
    content,
  ).markup;
}

/** A page with one message. */
export function message(ctx: Context, status: number, title: ConsoleMessageKey, body: ConsoleMessageKey): void {
  const { lang } = stateOf(ctx);
  render(ctx, status, ct(lang, title), html`<p>${ct(lang, body)}</p>`);
}

export const forbidden = (ctx: Context) => message(ctx, 403, 'forbidden_title', 'forbidden_body');
export const notFound = (ctx: Context) => message(ctx, 404, 'not_found_title', 'not_found_body');
