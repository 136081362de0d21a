import { randomBytes } from 'node:crypto';
import type { Context } from 'koa';
import { log } from '../lib/log';
import { LANG_COOKIE, readCookie, writeCookie } from './cookies';
import type { Html } from './html';
import { defaultLang, Lang, langOf, t } from './i18n';
import type { MessageKey } from './locales/en';
import type { PublicResponse } from './public-client';
import { Frame, MerchantBrand, page, screen } from './templates/layout';

const LANG_COOKIE_SECONDS = 365 * 24 * 60 * 60;

/** The messages the page script shows (errors, the OTP step, cancel and return progress). */
export const scriptMessages: MessageKey[] = [
  'code_sent_to',
  'resend_in',
  'working',
  'error_generic',
  'error_network',
  'error_phone',
  'error_code_format',
  'error_otp_invalid',
  'error_otp_expired',
  'error_otp_locked',
  'error_rate_limited',
  'error_required',
  'error_verify_first',
  'error_choose_method',
  'error_method_unavailable',
  'error_in_progress',
  'error_gateway',
  'return_slow',
  'return_very_slow',
];

/** One page response: the language, the CSP nonce and how to render into `ctx`. */
export class PageResponse {
  readonly nonce = randomBytes(16).toString('base64');
  lang: Lang;

  constructor(
    private readonly ctx: Context,
    private readonly secureCookies: boolean,
    fallbackLocale: string | null,
  ) {
    this.lang = this.chooseLang(fallbackLocale);
  }

  /** `?lang=` (remembered in a cookie), then the remembered choice, then the session's locale. */
  private chooseLang(fallbackLocale: string | null): Lang {
    const asked = typeof this.ctx.query.lang === 'string' ? langOf(this.ctx.query.lang) : null;
    if (asked) {
      writeCookie(this.ctx, LANG_COOKIE, asked, { maxAgeSeconds: LANG_COOKIE_SECONDS, secure: this.secureCookies });
      return asked;
    }
    return langOf(readCookie(this.ctx, LANG_COOKIE)) ?? langOf(fallbackLocale) ?? defaultLang;
  }

  /** This page in language `lang`, other query parameters kept. */
  readonly langHref = (lang: Lang): string => {
    const params = new URLSearchParams(this.ctx.querystring);
    params.set('lang', lang);
    return `${this.ctx.path}?${params.toString()}`;
  };

  send(status: number, frame: Omit<Frame, 'lang' | 'nonce' | 'langHref'>, content: Html): void {
    const { ctx } = this;
    ctx.status = status;
    ctx.type = 'text/html; charset=utf-8';
    ctx.set('Cache-Control', 'no-store');
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('Referrer-Policy', 'same-origin');
    ctx.set('X-Frame-Options', 'DENY');
    ctx.set(
      'Content-Security-Policy',
      [
        "default-src 'none'",
        "script-src 'self'",
        `style-src 'self' 'nonce-${this.nonce}'`,
        "img-src 'self' https: data:",
        "connect-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
      ].join('; '),
    );
    ctx.body = page({ ...frame, lang: this.lang, nonce: this.nonce, langHref: this.langHref }, content).markup;
  }

  /** A one-message screen. */
  message(
    status: number,
    key: { title: MessageKey; body: MessageKey },
    opts: { tone?: 'ok' | 'info' | 'warn' | 'error'; merchant?: MerchantBrand; livemode?: boolean } = {},
  ): void {
    const title = t(this.lang, key.title);
    this.send(
      status,
      { title, merchant: opts.merchant, livemode: opts.livemode },
      screen({ tone: opts.tone ?? 'warn', title, body: t(this.lang, key.body) }),
    );
  }

  notFound(): void {
    this.message(404, { title: 'not_found_title', body: 'not_found_body' });
  }

  /** The public routes refused for a reason the shopper cannot fix here (a suspended merchant, a limit, an outage). */
  unavailable(res: PublicResponse): void {
    if ((res.status === 429 || res.status === 503) && res.headers.retryAfter)
      this.ctx.set('Retry-After', res.headers.retryAfter);
    if (res.status >= 500)
      log.warn('hosted page: public route failed', { status: res.status, code: res.body?.error?.code });
    this.message(res.status === 429 ? 429 : 503, { title: 'unavailable_title', body: 'unavailable_body' });
  }
}
