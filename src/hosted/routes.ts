import { randomBytes } from 'node:crypto';
import Router from '@koa/router';
import compose from 'koa-compose';
import type { Context, Middleware } from 'koa';
import type { AppDeps } from '../app';
import { otpRules } from '../checkout/public-limits';
import { SESSION_CODE } from '../checkout/schemas';
import { log } from '../lib/log';
import { webhookRuntime } from '../webhooks/runtime';
import { attemptCookie, LANG_COOKIE, readCookie, tokenCookie, writeCookie } from './cookies';
import { formatMoney } from './format';
import { hostedKeys, HostedKeys } from './hosted-keys';
import { Html, html } from './html';
import { clientMessages, defaultLang, failureMessage, Lang, langOf, t } from './i18n';
import type { MessageKey } from './locales/en';
import { attemptOwner, Owner, sessionOwner } from './owners';
import { inProcessPublicClient, PublicClient, PublicResponse } from './public-client';
import type { AttemptLookup, AttemptPoll, PublicSession, TestGatewayRead } from './public-types';
import { relay } from './relay';
import { serveStatic } from './static-assets';
import { checkoutContent } from './templates/checkout';
import { gatewayContent } from './templates/gateway';
import { Frame, MerchantBrand, page, screen } from './templates/layout';
import { returnPendingContent, returnSucceededContent } from './templates/return';

interface HostedDeps {
  db: AppDeps['db'];
  api: PublicClient;
  keys: HostedKeys;
  testPhone: string;
  secureCookies: boolean;
  /** The origin of PUBLIC_BASE_URL, where shoppers open the pages. */
  publicOrigin: string;
}

const ATTEMPT_ID = /^pa_[A-Za-z0-9_]{1,96}$/;
const LANG_COOKIE_SECONDS = 365 * 24 * 60 * 60;

/** The messages the page script shows (errors, the OTP step, cancel and return progress). */
const scriptMessages: MessageKey[] = [
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
class PageResponse {
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
    if (res.status === 429 && res.headers.retryAfter) this.ctx.set('Retry-After', res.headers.retryAfter);
    if (res.status >= 500)
      log.warn('hosted page: public route failed', { status: res.status, code: res.body?.error?.code });
    this.message(res.status === 429 ? 429 : 503, { title: 'unavailable_title', body: 'unavailable_body' });
  }
}

/** `/c/<code>`: the checkout page, or the screen for the session's state. */
async function checkoutPage(deps: HostedDeps, ctx: Context): Promise<void> {
  const code = String(ctx.params.code);
  const owner = SESSION_CODE.test(code) ? await sessionOwner(deps.db, code) : undefined;
  const out = new PageResponse(ctx, deps.secureCookies, owner?.locale ?? null);
  if (!owner) return out.notFound();
  const key = await deps.keys.forMerchant(owner.merchant_id, owner.mode);
  const call = (path: string) =>
    deps.api({ method: 'GET', path, key, customerToken: readCustomerToken(ctx, code), clientIp: ctx.ip });

  const res = await call(`/sessions/${code}`);
  if (res.status === 410) {
    const expired = res.body?.error?.code === 'session_expired';
    return out.message(
      410,
      expired ? { title: 'expired_title', body: 'expired_body' } : { title: 'canceled_title', body: 'canceled_body' },
    );
  }
  if (res.status === 404) return out.notFound();
  if (res.status !== 200) return out.unavailable(res);
  const session = res.body as PublicSession;
  const frame = { merchant: session.merchant, livemode: session.livemode };
  const asked = typeof ctx.query.attempt === 'string' && ATTEMPT_ID.test(ctx.query.attempt) ? ctx.query.attempt : null;
  const remembered = readCookie(ctx, attemptCookie(code));
  const attemptId = asked ?? (remembered && ATTEMPT_ID.test(remembered) ? remembered : null);
  // Never polled while processing: the poll of a pending test attempt is the return page's "verify".
  const poll = async (): Promise<AttemptPoll | null> => {
    if (!attemptId || session.status === 'processing') return null;
    const r = await call(`/sessions/${code}/attempts/${attemptId}`);
    return r.status === 200 ? (r.body as AttemptPoll) : null;
  };

  if (session.status === 'processing') {
    const title = t(out.lang, 'processing_title');
    return out.send(
      200,
      { ...frame, title },
      screen({
        tone: 'info',
        title,
        body: t(out.lang, 'processing_body'),
        action: { href: attemptId ? `/r/${attemptId}` : `/c/${code}`, label: t(out.lang, 'check_status') },
      }),
    );
  }
  if (session.status === 'completed') {
    const attempt = await poll();
    const offline = session.payment_status === 'requires_offline_collection';
    const amount = formatMoney(
      attempt?.present.amount ?? session.amount,
      attempt?.present.currency ?? session.currency,
      out.lang,
    );
    const title = t(out.lang, offline ? 'cod_title' : 'paid_title');
    const body = offline
      ? t(out.lang, 'cod_body', { amount })
      : t(out.lang, 'paid_body', { amount, merchant: session.merchant.display_name });
    return out.send(
      200,
      { ...frame, title },
      screen({
        tone: 'ok',
        title,
        body,
        extra: html`<p class="reference">${t(out.lang, 'order_reference', { reference: session.reference_id })}</p>`,
        action: attempt?.redirect_to
          ? { href: attempt.redirect_to, label: t(out.lang, 'return_to', { merchant: session.merchant.display_name }) }
          : null,
      }),
    );
  }

  const failed = asked ? await poll() : null;
  const failure =
    failed && (failed.status === 'failed' || failed.status === 'canceled')
      ? failureMessage(failed.failure_reason, failed.status)
      : null;
  out.send(
    200,
    {
      ...frame,
      title: t(out.lang, 'checkout_title'),
      script: {
        page: 'checkout',
        data: {
          code,
          key,
          cancelUrl: session.cancel_url,
          collect: session.collect,
          verified: session.profile !== undefined,
          lang: out.lang,
          messages: clientMessages(out.lang, scriptMessages),
        },
      },
    },
    checkoutContent({
      lang: out.lang,
      session,
      failure,
      testPhone: session.livemode ? null : { phone: deps.testPhone, code: otpRules.testPhoneCode },
    }),
  );
}

const readCustomerToken = (ctx: Context, code: string) => readCookie(ctx, tokenCookie(code));

/** The merchant and mode of `/t/<id>` or `/r/<id>`, or a 404 screen. */
async function attemptPage(deps: HostedDeps, ctx: Context) {
  const attemptId = String(ctx.params.attemptId);
  const owner: Owner | undefined = ATTEMPT_ID.test(attemptId) ? await attemptOwner(deps.db, attemptId) : undefined;
  const out = new PageResponse(ctx, deps.secureCookies, owner?.locale ?? null);
  if (!owner) {
    out.notFound();
    return null;
  }
  const key = await deps.keys.forMerchant(owner.merchant_id, owner.mode);
  return { attemptId, out, key };
}

/** `/t/<attempt_id>`: the simulated vendor's page. */
async function gatewayPage(deps: HostedDeps, ctx: Context, error: MessageKey | null = null): Promise<void> {
  const found = await attemptPage(deps, ctx);
  if (!found) return;
  const { attemptId, out, key } = found;
  const res = await deps.api({ method: 'GET', path: `/test-gateway/${attemptId}`, key, clientIp: ctx.ip });
  if (res.status === 403) return out.message(403, { title: 'gateway_refused_title', body: 'gateway_refused_body' });
  if (res.status === 404) return out.notFound();
  if (res.status !== 200) return out.unavailable(res);
  const read = res.body as TestGatewayRead;
  const title = t(out.lang, 'gateway_title');
  out.send(
    error ? 409 : 200,
    { title, livemode: read.livemode },
    gatewayContent(out.lang, read, error && t(out.lang, error)),
  );
}

/** A button on `/t/<attempt_id>` (a plain form post): decide, then on to the return page. */
async function gatewayDecide(deps: HostedDeps, ctx: Context): Promise<void> {
  // A browser posting from another site is refused (the page itself is this origin, or PUBLIC_BASE_URL's).
  const origin = ctx.get('origin');
  if (origin && origin !== ctx.origin && origin !== deps.publicOrigin) {
    ctx.status = 403;
    ctx.body = 'Forbidden';
    return;
  }
  const form = new URLSearchParams((await readForm(ctx)) ?? '');
  const found = await attemptPage(deps, ctx);
  if (!found) return;
  const { attemptId, out, key } = found;
  const res = await deps.api({
    method: 'POST',
    path: `/test-gateway/${attemptId}/decide`,
    key,
    body: { decision: form.get('decision') ?? '' },
    clientIp: ctx.ip,
  });
  if (res.status === 200 || res.body?.error?.code === 'attempt_already_decided') {
    ctx.status = 303;
    ctx.redirect(`/r/${attemptId}`);
    return;
  }
  if (res.status === 403) return out.message(403, { title: 'gateway_refused_title', body: 'gateway_refused_body' });
  if (res.status === 404) return out.notFound();
  if (res.status === 400) return gatewayPage(deps, ctx, 'error_generic');
  out.unavailable(res);
}

function readForm(ctx: Context): Promise<string | null> {
  return new Promise((resolve, reject) => {
    let text = '';
    ctx.req.setEncoding('utf8');
    ctx.req.on('data', (chunk: string) => {
      text += chunk;
    });
    ctx.req.on('end', () => resolve(text.length <= 1024 ? text : null));
    ctx.req.on('error', reject);
  });
}

/** `/r/<attempt_id>`: asks the API to verify, then the merchant's success_url or back to the checkout page. */
async function returnPage(deps: HostedDeps, ctx: Context): Promise<void> {
  const found = await attemptPage(deps, ctx);
  if (!found) return;
  const { attemptId, out, key } = found;
  // The first read of a pending attempt with no button pressed is what asks the vendor to verify.
  const res = await deps.api({ method: 'GET', path: `/attempts/${attemptId}`, key, clientIp: ctx.ip });
  if (res.status === 404) return out.notFound();
  if (res.status !== 200) return out.unavailable(res);
  const poll = res.body as AttemptLookup;
  const frame = { merchant: poll.merchant, livemode: poll.livemode };
  if (poll.status === 'failed' || poll.status === 'canceled') {
    ctx.status = 303;
    ctx.redirect(`/c/${poll.code}?attempt=${attemptId}`);
    return;
  }
  if (poll.status === 'succeeded' && !poll.redirect_to) {
    ctx.status = 303;
    ctx.redirect(`/c/${poll.code}?attempt=${attemptId}`);
    return;
  }
  const script = {
    page: 'return' as const,
    data: { attemptId, key, redirectTo: poll.redirect_to, messages: clientMessages(out.lang, scriptMessages) },
  };
  if (poll.status === 'succeeded') {
    const title = t(out.lang, 'return_success_title');
    return out.send(200, { ...frame, title, script }, returnSucceededContent(out.lang, poll, poll.redirect_to!));
  }
  out.send(
    200,
    { ...frame, title: t(out.lang, 'return_title'), script, noscriptRefreshSeconds: 5 },
    returnPendingContent(out.lang, poll),
  );
}

/** A fault in the hosted pages is a plain error page, logged like the APIs' 500s (never a stack trace to the shopper). */
const hostedErrors: Middleware = async (ctx, next) => {
  try {
    await next();
  } catch (err) {
    log.error('hosted page failed', {
      method: ctx.method,
      path: ctx.path,
      error: err instanceof Error ? err.stack : String(err),
    });
    const out = new PageResponse(ctx, false, null);
    out.message(500, { title: 'unavailable_title', body: 'unavailable_body' });
  }
};

const HOSTED_PREFIXES = ['/c/', '/t/', '/r/', '/hosted/'];

/**
 * The hosted checkout pages, mounted beside the APIs: `/c/<code>`, `/t/<attempt_id>`,
 * `/r/<attempt_id>`, the script relay under `/hosted/api/public/` and the static assets. They
 * talk to the service only through `publicApi` (the `/v1` stack) with the merchant's hosted-page
 * publishable key.
 */
export function hostedStack(deps: AppDeps, publicApi: Middleware): Middleware {
  const secureCookies = deps.settings.PUBLIC_BASE_URL.startsWith('https:');
  const hosted: HostedDeps = {
    db: deps.db,
    api: inProcessPublicClient(publicApi),
    keys: hostedKeys(deps.db, (deps.webhooks ?? webhookRuntime(deps.settings)).cipher),
    testPhone: deps.settings.TEST_PHONE,
    secureCookies,
    publicOrigin: new URL(deps.settings.PUBLIC_BASE_URL).origin,
  };
  const router = new Router();
  router.get('/c/:code', (ctx) => checkoutPage(hosted, ctx));
  router.get('/t/:attemptId', (ctx) => gatewayPage(hosted, ctx));
  router.post('/t/:attemptId', (ctx) => gatewayDecide(hosted, ctx));
  router.get('/r/:attemptId', (ctx) => returnPage(hosted, ctx));
  const stack = compose<any>([hostedErrors, serveStatic, relay(hosted.api, { secureCookies }), router.routes()]);
  return (ctx, next) => (HOSTED_PREFIXES.some((p) => ctx.path.startsWith(p)) ? stack(ctx, next) : next());
}
