import Router from '@koa/router';
import compose from 'koa-compose';
import type { Context, Middleware } from 'koa';
import { readCookie } from '../hosted/cookies';
import { readLimited } from '../http/body';
import { checkoutRequestId } from '../http/request-id';
import { routeTemplate } from '../http/request-log';
import { dependencyUnavailable } from '../http/unavailable';
import type { AppDeps } from '../deps';
import { log } from '../lib/log';
import { webhookRuntime } from '../webhooks/runtime';
import { consoleActions } from '../telemetry/console';
import { auditLogPage, revokeOwnSession, sessionsPage } from './account-pages';
import { ConsoleDeps, ConsoleState, chooseLang, forbidden, message, stateOf } from './context';
import * as auth from './auth-pages';
import { allowed, ConsoleAction } from './roles';
import {
  csrfMatches,
  CSRF_FIELD,
  MODE_COOKIE,
  PRE_SESSION_CSRF_COOKIE,
  preSessionCsrfToken,
  sameOrigin,
  securityHeaders,
  SESSION_COOKIE,
  sessionCsrfToken,
  setHostCookie,
} from './security';
import * as passkeys from './passkey-pages';
import * as products from './product-pages';
import * as seller from './seller-pages';
import * as inventory from './inventory-pages';
import * as queues from './order-queue-pages';
import * as users from './user-pages';
import * as merchantKeys from './merchant-key-pages';
import { API_KEYS } from './merchant-key-pages';
import * as webhooks from './webhook-pages';
import * as events from './event-pages';
import * as payments from './payment-pages';
import { WEBHOOKS } from './webhook-pages';
import { recentlyReauthenticated, sessionOf } from './sessions';

export const CONSOLE_PREFIX = '/console';
const FORM_LIMIT_BYTES = 64 * 1024;

/** A fault is a plain error page (never a stack trace), logged; a dependency past its deadline is a 503. */
const consoleErrors: Middleware = async (ctx, next) => {
  try {
    await next();
  } catch (err) {
    const unavailable = dependencyUnavailable(ctx, err);
    if (!unavailable) log.error('console page failed', { method: ctx.method, route: routeTemplate(ctx), error: err });
    if (!ctx.state.console)
      ctx.state.console = { lang: 'en', session: null, csrf: '', form: new URLSearchParams(), mode: 'test' };
    message(ctx, unavailable ? 503 : 500, 'error_title', 'error_body');
  }
};

/** Reads an `application/x-www-form-urlencoded` body (64 KiB at most) into `state.form`. */
const formBody: Middleware = async (ctx, next) => {
  if (ctx.method !== 'POST') return next();
  if (!ctx.is('application/x-www-form-urlencoded')) {
    ctx.req.resume();
    ctx.status = 415;
    ctx.body = 'Unsupported Media Type';
    return;
  }
  const raw = await readLimited(ctx.req, FORM_LIMIT_BYTES).catch(() => null);
  if (raw === null) {
    ctx.status = 413;
    ctx.body = 'Payload Too Large';
    return;
  }
  const form = new URLSearchParams(raw.toString('utf8'));
  // Postgres text cannot hold U+0000: refused here, for every form, rather than a 500 at the write.
  if ([...form].some(([name, value]) => name.includes('\u0000') || value.includes('\u0000')))
    return message(ctx, 400, 'csrf_title', 'bad_form_body');
  stateOf(ctx).form = form;
  return next();
};

/** The session from its cookie (if live), the language and the CSRF token of the page. */
function loadState(deps: ConsoleDeps): Middleware {
  return async (ctx, next) => {
    const state: ConsoleState = {
      lang: chooseLang(ctx),
      session: null,
      csrf: '',
      form: new URLSearchParams(),
      mode: readCookie(ctx, MODE_COOKIE) === 'live' ? 'live' : 'test',
    };
    ctx.state.console = state;
    const token = readCookie(ctx, SESSION_COOKIE);
    if (token && /^[A-Za-z0-9_-]{43}$/.test(token)) state.session = await sessionOf(deps.db, token, deps.clock());
    state.csrf = state.session
      ? sessionCsrfToken(state.session.token)
      : preSessionCsrfToken(ctx, readCookie(ctx, PRE_SESSION_CSRF_COOKIE));
    return next();
  };
}

/**
 * Every POST: from the console's own origin (Origin, Sec-Fetch-Site) and carrying the page's
 * CSRF token (bound to the session, or the pre-session cookie's). Refused: 403, nothing done.
 */
function csrfGuard(deps: ConsoleDeps): Middleware {
  return async (ctx, next) => {
    if (ctx.method !== 'POST') return next();
    const state = stateOf(ctx);
    if (!sameOrigin(ctx, deps.origin) || !csrfMatches(state.form.get(CSRF_FIELD), state.csrf)) {
      consoleActions.inc({ action: 'csrf_check', outcome: 'denied' });
      log.warn('console: cross-site or token-less post refused', {
        route: ctx.path,
        origin: ctx.get('origin') || undefined,
      });
      return message(ctx, 403, 'csrf_title', 'csrf_body');
    }
    return next();
  };
}

type Handler = (deps: ConsoleDeps, ctx: Context) => unknown;

/** Signed in (both factors); otherwise the sign-in page (a GET) or 401 (a POST). */
const signedIn = (ctx: Context): boolean => {
  const s = stateOf(ctx).session;
  if (s?.complete) return true;
  if (ctx.method === 'GET') {
    ctx.status = 303;
    ctx.redirect('/console/sign-in');
  } else message(ctx, 401, 'sign_in', 'expired_step');
  return false;
};

/**
 * The guards of one route: signed in; a seller's user for seller pages; the role `action` needs;
 * and for `reauth` actions, password and code within the last few minutes (else, to the page that
 * asks, which then returns to the page `reauth` names).
 */
function guard(
  deps: ConsoleDeps,
  handler: Handler,
  opts: {
    tenant?: 'seller' | 'merchant';
    action?: ConsoleAction;
    /** The page re-authentication returns to (of the request, for an object's own page). */
    reauth?: string | ((ctx: Context) => string);
  } = {},
): (ctx: Context) => Promise<void> {
  return async (ctx: Context) => {
    if (!signedIn(ctx)) return;
    const { user } = stateOf(ctx).session!;
    if (
      (opts.tenant === 'seller' && !user.seller_id) ||
      (opts.tenant === 'merchant' && !user.merchant_id) ||
      (opts.action && !allowed(user.role, opts.action))
    ) {
      consoleActions.inc({ action: opts.action ?? 'page', outcome: 'denied' });
      return forbidden(ctx);
    }
    if (opts.reauth && !recentlyReauthenticated(stateOf(ctx).session!, deps.clock())) {
      ctx.status = 303;
      const back = typeof opts.reauth === 'string' ? opts.reauth : opts.reauth(ctx);
      return ctx.redirect(`/console/reauth?next=${encodeURIComponent(back)}`);
    }
    await handler(deps, ctx);
  };
}

function home(_deps: ConsoleDeps, ctx: Context) {
  const { user } = stateOf(ctx).session!;
  ctx.status = 303;
  ctx.redirect(user.seller_id ? '/console/orders' : WEBHOOKS);
}

/**
 * The merchant pages' test/live switch: the `__Host-console_mode` preference (a year), then back
 * to the console page it came from. Not audited (it changes what is shown, not any data).
 */
function setMode(_deps: ConsoleDeps, ctx: Context) {
  const state = stateOf(ctx);
  const mode = state.form.get('mode');
  if (mode !== 'test' && mode !== 'live') return message(ctx, 422, 'error_title', 'choose_mode');
  setHostCookie(ctx, MODE_COOKIE, mode, 365 * 86_400);
  consoleActions.inc({ action: 'mode_switch', outcome: 'success' });
  const next = state.form.get('next') ?? '';
  ctx.status = 303;
  // Only a path of the console itself, never another site.
  ctx.redirect(/^\/console(\/[A-Za-z0-9_\/-]*)?$/.test(next) ? next : CONSOLE_PREFIX);
}

/**
 * The console under /console: its own middleware (request id, errors, security headers, form
 * body, session, CSRF) and router. Every route and the role it needs: docs/console.md.
 */
export function consoleStack(deps: ConsoleDeps): Middleware {
  const r = new Router({ prefix: CONSOLE_PREFIX });
  const open = (h: Handler) => (ctx: Context) => h(deps, ctx);
  r.get('/', guard(deps, home));
  r.get('/sign-in', (ctx) => auth.signInPage(ctx));
  r.post('/sign-in', open(auth.signIn));
  r.get('/sign-in/verify', open(auth.verifyPage));
  r.post('/sign-in/verify', open(auth.verify));
  r.post('/sign-in/passkey/options', open(auth.passkeyOptions));
  r.post('/sign-in/passkey', open(auth.verifyPasskey));
  r.post('/sign-out', open(auth.signOut));
  r.get('/invite/:token', open(auth.invitePage));
  r.post('/invite/:token', open(auth.inviteAccept));
  r.get('/reauth', guard(deps, auth.reauthPage));
  r.post('/reauth', guard(deps, auth.reauth));
  r.post('/reauth/passkey/options', guard(deps, auth.reauthPasskeyOptions));
  r.post('/reauth/passkey', guard(deps, auth.reauthPasskey));
  const security = { reauth: passkeys.SECURITY_PATH } as const;
  r.get(
    '/account/security',
    guard(deps, (d, ctx) => passkeys.securityPage(d, ctx)),
  );
  r.post('/account/passkeys/options', guard(deps, passkeys.registrationOptionsRoute, security));
  r.post('/account/passkeys', guard(deps, passkeys.addPasskey, security));
  r.post('/account/passkeys/:passkeyId/remove', guard(deps, passkeys.deletePasskey, security));
  r.get('/account/sessions', guard(deps, sessionsPage));
  r.post('/account/sessions/:sessionId/revoke', guard(deps, revokeOwnSession));
  r.get('/audit', guard(deps, auditLogPage, { action: 'audit.read' }));

  const keys = { tenant: 'seller', action: 'partner_keys.manage' } as const;
  r.get(
    '/settings/integrations',
    guard(deps, (d, ctx) => seller.integrationsPage(d, ctx), { tenant: 'seller' }),
  );
  r.post(
    '/settings/integrations/keys',
    guard(deps, seller.createKey, { ...keys, reauth: '/console/settings/integrations' }),
  );
  r.post(
    '/settings/integrations/keys/:keyId/scopes',
    guard(deps, seller.rescopeKey, { ...keys, reauth: '/console/settings/integrations' }),
  );
  r.post('/settings/integrations/keys/:keyId/revoke', guard(deps, seller.revokeKey, keys));

  const orders = { tenant: 'seller', action: 'orders.transition' } as const;
  r.get(
    '/orders',
    guard(deps, (d, ctx) => queues.ordersPage(d, ctx), { tenant: 'seller' }),
  );
  r.get(
    '/orders/:orderId',
    guard(deps, (d, ctx) => seller.orderPage(d, ctx), { tenant: 'seller' }),
  );
  // Before `/orders/:orderId/…`, which would take `bulk` for an order id.
  const bulk = { ...orders, reauth: queues.ORDERS };
  r.post('/orders/bulk/accept', guard(deps, queues.bulkOrders('accept'), bulk));
  r.post('/orders/bulk/ship', guard(deps, queues.bulkOrders('ship'), bulk));
  r.post('/orders/bulk/cancel', guard(deps, queues.bulkOrders('cancel'), bulk));
  r.post('/orders/:orderId/accept', guard(deps, seller.moveOrder('accept'), orders));
  r.post('/orders/:orderId/ship', guard(deps, seller.moveOrder('ship'), orders));
  r.post('/orders/:orderId/cancel', guard(deps, seller.moveOrder('cancel'), orders));

  const stock = { tenant: 'seller', action: 'inventory.write' } as const;
  r.get('/inventory', guard(deps, inventory.inventoryPage, { tenant: 'seller' }));
  r.get(
    '/inventory/:variantId',
    guard(deps, (d, ctx) => inventory.inventoryItemPage(d, ctx), { tenant: 'seller' }),
  );
  r.post('/inventory/:variantId/stock', guard(deps, inventory.setInventoryValue('stock'), stock));
  r.post('/inventory/:variantId/price', guard(deps, inventory.setInventoryValue('price'), stock));
  r.post('/inventory/:variantId/adjustments', guard(deps, inventory.adjustStock, stock));

  const manageUsers = { action: 'users.manage' } as const;
  r.get(
    '/settings/users',
    guard(deps, (d, ctx) => users.usersPage(d, ctx), manageUsers),
  );
  r.post(
    '/settings/users/invite',
    guard(deps, users.inviteUser, { ...manageUsers, reauth: '/console/settings/users' }),
  );
  r.post(
    '/settings/users/:userId/role',
    guard(deps, users.changeRole, { ...manageUsers, reauth: '/console/settings/users' }),
  );
  r.post(
    '/settings/users/:userId/disable',
    guard(deps, users.disableUser, { ...manageUsers, reauth: '/console/settings/users' }),
  );
  r.post(
    '/settings/users/:userId/enable',
    guard(deps, users.enableUser, { ...manageUsers, reauth: '/console/settings/users' }),
  );
  r.post(
    '/settings/users/invites/:inviteId/revoke',
    guard(deps, users.revokeInvite, { ...manageUsers, reauth: '/console/settings/users' }),
  );

  const review = { tenant: 'seller', action: 'products.submit' } as const;
  r.get('/products', guard(deps, products.productsPage, { tenant: 'seller' }));
  r.get(
    '/products/:productId',
    guard(deps, (d, ctx) => products.productPage(d, ctx), { tenant: 'seller' }),
  );
  r.post('/products/:productId/submit', guard(deps, products.reviewProduct('submit'), review));
  r.post('/products/:productId/resubmit', guard(deps, products.reviewProduct('resubmit'), review));

  r.post('/mode', guard(deps, setMode, { tenant: 'merchant' }));
  const hooks = { tenant: 'merchant', action: 'webhooks.manage' } as const;
  r.get(
    '/developers/webhooks',
    guard(deps, (d, ctx) => webhooks.webhooksPage(d, ctx), { tenant: 'merchant' }),
  );
  r.post('/developers/webhooks', guard(deps, webhooks.createEndpointAction, hooks));
  r.get(
    '/developers/webhooks/:endpointId',
    guard(deps, (d, ctx) => webhooks.endpointPage(d, ctx), { tenant: 'merchant' }),
  );
  r.post('/developers/webhooks/:endpointId/events', guard(deps, webhooks.patchEndpointAction('events'), hooks));
  r.post('/developers/webhooks/:endpointId/disable', guard(deps, webhooks.patchEndpointAction('disable'), hooks));
  r.post('/developers/webhooks/:endpointId/enable', guard(deps, webhooks.patchEndpointAction('enable'), hooks));
  r.post(
    '/developers/webhooks/:endpointId/rotate',
    guard(deps, webhooks.rotateSecretAction, { ...hooks, reauth: WEBHOOKS }),
  );
  r.post('/developers/webhooks/:endpointId/test', guard(deps, webhooks.testEventAction, hooks));
  r.post('/developers/webhooks/:endpointId/deliveries/:eventId/resend', guard(deps, webhooks.resendAction, hooks));
  r.post('/developers/webhooks/:endpointId/recover', guard(deps, webhooks.recoverAction, hooks));

  r.get('/payments', guard(deps, payments.sessionsPage, { tenant: 'merchant' }));
  r.get(
    '/payments/:sessionId',
    guard(deps, (d, ctx) => payments.sessionPage(d, ctx), { tenant: 'merchant' }),
  );
  r.post(
    '/payments/:sessionId/refunds',
    guard(deps, payments.refundAction, {
      tenant: 'merchant',
      action: 'refunds.create',
      reauth: (ctx) => payments.sessionPath(String(ctx.params.sessionId)),
    }),
  );

  r.get('/developers/events', guard(deps, events.eventsPage, { tenant: 'merchant' }));

  const checkoutKeys = { tenant: 'merchant', action: 'checkout_keys.manage' } as const;
  r.get(
    '/developers/keys',
    guard(deps, (d, ctx) => merchantKeys.keysPage(d, ctx), { tenant: 'merchant' }),
  );
  r.post('/developers/keys', guard(deps, merchantKeys.createKeyAction, { ...checkoutKeys, reauth: API_KEYS }));
  r.post(
    '/developers/keys/:keyId/roll',
    guard(deps, merchantKeys.rollKeyAction, { ...checkoutKeys, reauth: API_KEYS }),
  );
  r.post('/developers/keys/:keyId/revoke', guard(deps, merchantKeys.revokeKeyAction, checkoutKeys));

  const notFound: Middleware = async (ctx, next) => {
    await next();
    if (ctx.body === undefined && ctx.status === 404) message(ctx, 404, 'not_found_title', 'not_found_body');
  };
  return compose<any>([
    checkoutRequestId,
    consoleErrors,
    securityHeaders,
    loadState(deps),
    formBody,
    csrfGuard(deps),
    notFound,
    r.routes(),
    r.allowedMethods(),
  ]);
}

/** The console's dependencies from the app's. */
export function consoleDeps(deps: AppDeps): ConsoleDeps {
  const runtime = deps.webhooks ?? webhookRuntime(deps.settings);
  return {
    db: deps.db,
    clock: deps.clock,
    cipher: runtime.cipher,
    webhooks: {
      db: deps.db,
      clock: deps.clock,
      temporal: deps.temporal,
      taskQueue: deps.settings.TEMPORAL_TASK_QUEUE,
      runtime,
    },
    sessions: {
      db: deps.db,
      clock: deps.clock,
      temporal: deps.temporal,
      taskQueue: deps.settings.TEMPORAL_TASK_QUEUE,
      publicBaseUrl: deps.settings.PUBLIC_BASE_URL,
      beforeHandoff: deps.beforeHandoff,
    },
    origin: new URL(deps.settings.PUBLIC_BASE_URL).origin,
    partnerEnvironment: deps.settings.PARTNER_ENVIRONMENT,
    liveKeysAllowed: Boolean(deps.settings.WEBHOOK_SECRET_KEY),
  };
}
