import type { Context } from 'koa';
import { html } from '../hosted/html';
import { hit } from '../http/rate-limit';
import { acceptInvite, checkPassword, checkSecondFactor, openInvite, userById } from './accounts';
import { audit } from './audit';
import { ConsoleDeps, message, render, stateOf } from './context';
import { csrfField, notice } from './layout';
import { ConsoleMessageKey, ct } from './messages';
import { passwordProblem } from './passwords';
import { SESSION_COOKIE, setHostCookie, sessionCsrfToken } from './security';
import { totpUri } from './totp';
import { authenticatePasskey, authenticationOptions, hasPasskey, relyingParty } from './passkeys';
import { completeSession, markReauthenticated, REAUTH_WINDOW_MS, revokeSession, startSession } from './sessions';

/** Sign-in tries counted per e-mail and per client IP, each in fixed 15-minute windows. */
export const SIGN_IN_LIMITS = {
  perEmail: { limit: 10, windowSeconds: 900 },
  perIp: { limit: 100, windowSeconds: 900 },
  /** Second-factor codes per session (the sign-in's second step, and re-authentication). */
  perSession: { limit: 10, windowSeconds: 900 },
} as const;

const field = (ctx: Context, name: string) => stateOf(ctx).form.get(name) ?? '';

/** Sets the session cookie: no Max-Age, so the browser forgets it when closed; the server's timeouts decide. */
function setSessionCookie(ctx: Context, token: string) {
  setHostCookie(ctx, SESSION_COOKIE, token, null);
  stateOf(ctx).csrf = sessionCsrfToken(token);
}

function signInForm(ctx: Context, status: number, error: string | null, email = '') {
  const { lang, csrf } = stateOf(ctx);
  render(
    ctx,
    status,
    ct(lang, 'sign_in_title'),
    html`${notice('error', error)}
      <form method="post" action="/console/sign-in" class="stack">
        ${csrfField(csrf)}
        <label
          >${ct(lang, 'email')} <input type="email" name="email" autocomplete="username" required value="${email}"
        /></label>
        <label
          >${ct(lang, 'password')} <input type="password" name="password" autocomplete="current-password" required
        /></label>
        <button type="submit">${ct(lang, 'continue')}</button>
      </form>`,
  );
}

export function signInPage(ctx: Context) {
  if (stateOf(ctx).session?.complete) return ctx.redirect('/console');
  signInForm(ctx, 200, null);
}

/** A refused try: 429 with Retry-After and a page saying how long to wait. */
function throttled(ctx: Context, retryAfter: number, again: () => void) {
  ctx.set('Retry-After', String(retryAfter));
  again();
  ctx.status = 429;
}

export async function signIn(deps: ConsoleDeps, ctx: Context) {
  const { lang } = stateOf(ctx);
  const email = field(ctx, 'email').trim().slice(0, 320);
  const password = field(ctx, 'password');
  const now = deps.clock();
  const byEmail = await hit(deps.db, `console-sign-in:email:${email.toLowerCase()}`, SIGN_IN_LIMITS.perEmail, now);
  const byIp = await hit(deps.db, `console-sign-in:ip:${ctx.ip}`, SIGN_IN_LIMITS.perIp, now);
  if (!byEmail.allowed || !byIp.allowed) {
    await audit(deps.db, ctx, {
      email,
      action: 'sign_in',
      outcome: 'denied',
      detail: { reason: 'throttled' },
      at: now,
    });
    const retryAfter = Math.max(byEmail.allowed ? 0 : byEmail.retryAfter, byIp.allowed ? 0 : byIp.retryAfter);
    const minutes = Math.ceil(retryAfter / 60);
    return throttled(ctx, retryAfter, () => signInForm(ctx, 429, ct(lang, 'throttled', { minutes }), email));
  }
  const user = await checkPassword(deps.db, email, password);
  if (!user) {
    await audit(deps.db, ctx, { email, action: 'sign_in', outcome: 'failed', detail: { step: 'password' }, at: now });
    return signInForm(ctx, 401, ct(lang, 'bad_credentials'), email);
  }
  const session = await startSession(deps.db, user, {
    now,
    ip: ctx.ip,
    userAgent: ctx.get('user-agent'),
    complete: false,
  });
  setSessionCookie(ctx, session.token);
  ctx.status = 303;
  ctx.redirect('/console/sign-in/verify');
}

/**
 * A passkey form (hidden until the page's script finds the browser can use passkeys): asks
 * `options` for a challenge, runs the browser's prompt and posts the answer to `action`.
 */
function passkeySection(ctx: Context, action: string, options: string, prompt: ConsoleMessageKey) {
  const { lang, csrf } = stateOf(ctx);
  return html`<section data-passkey-section hidden>
    <form
      method="post"
      action="${action}"
      class="stack"
      data-passkey="authenticate"
      data-options="${options}"
      data-failed="${ct(lang, 'passkey_failed')}"
    >
      ${csrfField(csrf)}
      <input type="hidden" name="response" value="" />
      <p>${ct(lang, prompt)}</p>
      <p class="notice notice-error" role="alert" data-passkey-status hidden></p>
      <button type="submit">${ct(lang, 'use_passkey')}</button>
    </form>
  </section>`;
}

const PASSKEY_SCRIPTS = ['simplewebauthn-browser.js', 'console-passkeys.js'] as const;

/**
 * Re-authentication's page: password and a code, and for a user with a passkey a passkey form
 * (the passkey alone re-authenticates: docs/decisions.md); both return to `next`.
 */
async function reauthForm(deps: ConsoleDeps, ctx: Context, status: number, next: string, error: string | null) {
  const { lang, csrf, session } = stateOf(ctx);
  const withPasskey = await hasPasskey(deps.db, session!.user.id);
  const back = `?next=${encodeURIComponent(next)}`;
  render(
    ctx,
    status,
    ct(lang, 'reauth_title'),
    html`${notice('error', error)}
      ${withPasskey && passkeySection(ctx, `/console/reauth/passkey${back}`, '/console/reauth/passkey/options', 'reauth_passkey')}
      <p>${ct(lang, 'reauth_help', { minutes: REAUTH_WINDOW_MS / 60_000 })}</p>
      <form method="post" action="/console/reauth${back}" class="stack">
        ${csrfField(csrf)}
        <label
          >${ct(lang, 'password')} <input type="password" name="password" autocomplete="current-password" required
        /></label>
        <label
          >${ct(lang, 'code')} <input type="text" name="code" inputmode="numeric" autocomplete="one-time-code" required
        /></label>
        <button type="submit">${ct(lang, 'verify')}</button>
      </form>`,
    undefined,
    withPasskey ? [...PASSKEY_SCRIPTS] : undefined,
  );
}

/**
 * The sign-in's second step: the code form, and for a user with a passkey a passkey form (hidden
 * until the page's script finds the browser can use passkeys; the code form needs no script).
 */
async function secondStepPage(deps: ConsoleDeps, ctx: Context, status: number, error: string | null) {
  const { lang, csrf, session } = stateOf(ctx);
  const withPasskey = await hasPasskey(deps.db, session!.user.id);
  render(
    ctx,
    status,
    ct(lang, 'verify_title'),
    html`${notice('error', error)}
      ${withPasskey && passkeySection(ctx, '/console/sign-in/passkey', '/console/sign-in/passkey/options', 'passkey_sign_in')}
      <p>${ct(lang, 'verify_help')}</p>
      <form method="post" action="/console/sign-in/verify" class="stack">
        ${csrfField(csrf)}
        <label
          >${ct(lang, 'code')} <input type="text" name="code" inputmode="numeric" autocomplete="one-time-code" required
        /></label>
        <button type="submit">${ct(lang, 'verify')}</button>
      </form>`,
    undefined,
    withPasskey ? [...PASSKEY_SCRIPTS] : undefined,
  );
}

export async function verifyPage(deps: ConsoleDeps, ctx: Context) {
  const { session } = stateOf(ctx);
  if (session?.complete) return ctx.redirect('/console');
  if (!session) return message(ctx, 401, 'sign_in', 'expired_step');
  await secondStepPage(deps, ctx, 200, null);
}

/**
 * A second-factor try of the session waiting for one: counted (SIGN_IN_LIMITS.perSession; past
 * the limit the session ends, 429); false when the request was answered here.
 */
async function secondFactorAllowed(deps: ConsoleDeps, ctx: Context, now: Date): Promise<boolean> {
  const { session } = stateOf(ctx);
  if (!session || session.complete) {
    message(ctx, 401, 'sign_in', 'expired_step');
    return false;
  }
  const tries = await hit(deps.db, `console-2fa:${session.id}`, SIGN_IN_LIMITS.perSession, now);
  if (tries.allowed) return true;
  await audit(deps.db, ctx, { user: session.user, action: 'second_factor', outcome: 'denied', at: now });
  await revokeSession(deps.db, session.user.id, session.id, now);
  throttled(ctx, tries.retryAfter, () => message(ctx, 429, 'sign_in', 'expired_step'));
  return false;
}

/** The second factor was given: the session opens under a new token, and the sign-in is in the audit log. */
async function completeSignIn(deps: ConsoleDeps, ctx: Context, now: Date, detail: Record<string, unknown>) {
  const session = stateOf(ctx).session!;
  const token = await completeSession(deps.db, session.id, now);
  setSessionCookie(ctx, token);
  await audit(deps.db, ctx, {
    user: session.user,
    action: 'sign_in',
    outcome: 'success',
    target: session.id,
    detail,
    at: now,
  });
  ctx.status = 303;
  ctx.redirect('/console');
}

export async function verify(deps: ConsoleDeps, ctx: Context) {
  const { lang } = stateOf(ctx);
  const now = deps.clock();
  if (!(await secondFactorAllowed(deps, ctx, now))) return;
  const session = stateOf(ctx).session!;
  const factor = await checkSecondFactor(deps.db, deps.cipher, session.user.id, field(ctx, 'code'), now);
  if (!factor) {
    await audit(deps.db, ctx, { user: session.user, action: 'second_factor', outcome: 'failed', at: now });
    return secondStepPage(deps, ctx, 401, ct(lang, 'bad_code'));
  }
  await completeSignIn(deps, ctx, now, { factor });
}

/** The options for signing in with a passkey (JSON), for the session waiting for its second factor. */
export async function passkeyOptions(deps: ConsoleDeps, ctx: Context) {
  const { session } = stateOf(ctx);
  if (!session || session.complete) return message(ctx, 401, 'sign_in', 'expired_step');
  const options = await authenticationOptions(
    deps.db,
    relyingParty(deps.origin),
    session.user.id,
    session.id,
    deps.clock(),
  );
  if (!options) return message(ctx, 404, 'not_found_title', 'not_found_body');
  ctx.status = 200;
  ctx.body = options;
}

/** A passkey's assertion as the second factor: counted as a code is, and on success the same as a code. */
export async function verifyPasskey(deps: ConsoleDeps, ctx: Context) {
  const { lang } = stateOf(ctx);
  const now = deps.clock();
  if (!(await secondFactorAllowed(deps, ctx, now))) return;
  const session = stateOf(ctx).session!;
  const result = await authenticatePasskey(deps.db, relyingParty(deps.origin), {
    userId: session.user.id,
    sessionId: session.id,
    response: field(ctx, 'response'),
    now,
  });
  if (!result.ok) {
    await audit(deps.db, ctx, {
      user: session.user,
      action: 'second_factor',
      outcome: 'failed',
      detail: { factor: 'passkey', reason: result.reason },
      at: now,
    });
    return secondStepPage(deps, ctx, 401, ct(lang, 'passkey_failed'));
  }
  await completeSignIn(deps, ctx, now, { factor: 'passkey', passkey_id: result.passkeyId });
}

export async function signOut(deps: ConsoleDeps, ctx: Context) {
  const { session } = stateOf(ctx);
  if (session) {
    await revokeSession(deps.db, session.user.id, session.id, deps.clock());
    await audit(deps.db, ctx, {
      user: session.user,
      action: 'sign_out',
      target: session.id,
      outcome: 'success',
      at: deps.clock(),
    });
  }
  setHostCookie(ctx, SESSION_COOKIE, '', 0);
  ctx.status = 303;
  ctx.redirect('/console/sign-in');
}

/** Where to go back to after re-authenticating: a console path only. */
const safeNext = (next: unknown) =>
  typeof next === 'string' && /^\/console(\/[A-Za-z0-9/_-]*)?$/.test(next) ? next : '/console';

export function reauthPage(deps: ConsoleDeps, ctx: Context) {
  return reauthForm(deps, ctx, 200, safeNext(ctx.query.next), null);
}

/**
 * A re-authentication try (password and code, or a passkey), counted with the second-factor tries
 * of the session (SIGN_IN_LIMITS.perSession); past the limit, 429 and the page again. False when
 * the request was answered here.
 */
async function reauthAllowed(deps: ConsoleDeps, ctx: Context, next: string, now: Date): Promise<boolean> {
  const { lang, session } = stateOf(ctx);
  const tries = await hit(deps.db, `console-2fa:${session!.id}`, SIGN_IN_LIMITS.perSession, now);
  if (tries.allowed) return true;
  ctx.set('Retry-After', String(tries.retryAfter));
  await reauthForm(deps, ctx, 429, next, ct(lang, 'throttled', { minutes: Math.ceil(tries.retryAfter / 60) }));
  return false;
}

/** Re-authenticated: the session's clock restarts, the audit log says by which factor, and back to `next`. */
async function reauthenticated(
  deps: ConsoleDeps,
  ctx: Context,
  now: Date,
  next: string,
  detail: Record<string, unknown>,
) {
  const s = stateOf(ctx).session!;
  await markReauthenticated(deps.db, s.id, now);
  await audit(deps.db, ctx, { user: s.user, action: 'reauthenticate', outcome: 'success', detail, at: now });
  ctx.status = 303;
  ctx.redirect(next);
}

export async function reauth(deps: ConsoleDeps, ctx: Context) {
  const { lang, session } = stateOf(ctx);
  const s = session!;
  const now = deps.clock();
  const next = safeNext(ctx.query.next);
  const again = (status: number, error: string) => reauthForm(deps, ctx, status, next, error);
  if (!(await reauthAllowed(deps, ctx, next, now))) return;
  const byPassword = await checkPassword(deps.db, s.user.email, field(ctx, 'password'));
  const factor = byPassword && (await checkSecondFactor(deps.db, deps.cipher, s.user.id, field(ctx, 'code'), now));
  if (!byPassword || !factor) {
    await audit(deps.db, ctx, { user: s.user, action: 'reauthenticate', outcome: 'failed', at: now });
    return again(401, ct(lang, byPassword ? 'bad_code' : 'bad_credentials'));
  }
  await reauthenticated(deps, ctx, now, next, { factor });
}

/** The options (JSON) for re-authenticating with a passkey: user verification required; 404 without any passkey. */
export async function reauthPasskeyOptions(deps: ConsoleDeps, ctx: Context) {
  const { session } = stateOf(ctx);
  const options = await authenticationOptions(
    deps.db,
    relyingParty(deps.origin),
    session!.user.id,
    session!.id,
    deps.clock(),
    'reauth',
  );
  if (!options) return message(ctx, 404, 'not_found_title', 'not_found_body');
  ctx.status = 200;
  ctx.body = options;
}

/**
 * A passkey's assertion (with user verification) re-authenticates the session as password and
 * code do: against a challenge of this session for `reauth`, used once, the counter checked.
 */
export async function reauthPasskey(deps: ConsoleDeps, ctx: Context) {
  const { lang, session } = stateOf(ctx);
  const s = session!;
  const now = deps.clock();
  const next = safeNext(ctx.query.next);
  if (!(await reauthAllowed(deps, ctx, next, now))) return;
  const result = await authenticatePasskey(deps.db, relyingParty(deps.origin), {
    userId: s.user.id,
    sessionId: s.id,
    response: field(ctx, 'response'),
    now,
    purpose: 'reauth',
  });
  if (!result.ok) {
    await audit(deps.db, ctx, {
      user: s.user,
      action: 'reauthenticate',
      outcome: 'failed',
      detail: { factor: 'passkey', reason: result.reason },
      at: now,
    });
    return reauthForm(deps, ctx, 401, next, ct(lang, 'passkey_failed'));
  }
  await reauthenticated(deps, ctx, now, next, { factor: 'passkey', passkey_id: result.passkeyId });
}

function inviteForm(
  ctx: Context,
  status: number,
  invite: { email: string; role: string; totpSecret: string },
  uri: string,
  error: string | null,
) {
  const { lang, csrf } = stateOf(ctx);
  render(
    ctx,
    status,
    ct(lang, 'invite_title'),
    html`${notice('error', error)}
      <p>${ct(lang, 'invite_for', { role: invite.role, email: invite.email })}</p>
      <form method="post" action="${ctx.path}" class="stack">
        ${csrfField(csrf)}
        <input type="text" name="username" value="${invite.email}" autocomplete="username" hidden />
        <label
          >${ct(lang, 'new_password')}
          <input type="password" name="password" autocomplete="new-password" minlength="12" required
        /></label>
        <label
          >${ct(lang, 'confirm_password')}
          <input type="password" name="password_again" autocomplete="new-password" minlength="12" required
        /></label>
        <p>${ct(lang, 'invite_totp')}</p>
        <p>${ct(lang, 'totp_key')}: <code class="secret" id="totp-key">${invite.totpSecret}</code></p>
        <p><a href="${uri}">${ct(lang, 'totp_link')}</a></p>
        <label
          >${ct(lang, 'code')} <input type="text" name="code" inputmode="numeric" autocomplete="one-time-code" required
        /></label>
        <button type="submit">${ct(lang, 'create_account')}</button>
      </form>`,
  );
}

export async function invitePage(deps: ConsoleDeps, ctx: Context) {
  const token = String(ctx.params.token);
  const invite = await openInvite(deps.db, deps.cipher, token, deps.clock());
  if (!invite) return message(ctx, 404, 'invite_title', 'invite_invalid');
  inviteForm(ctx, 200, invite, totpUri(invite.totpSecret, invite.email), null);
}

export async function inviteAccept(deps: ConsoleDeps, ctx: Context) {
  const { lang } = stateOf(ctx);
  const token = String(ctx.params.token);
  const now = deps.clock();
  const invite = await openInvite(deps.db, deps.cipher, token, now);
  if (!invite) return message(ctx, 404, 'invite_title', 'invite_invalid');
  const again = (error: string) => inviteForm(ctx, 422, invite, totpUri(invite.totpSecret, invite.email), error);
  const password = field(ctx, 'password');
  const problem = passwordProblem(password);
  if (problem) return again(ct(lang, problem === 'too_short' ? 'password_short' : 'password_long'));
  if (password !== field(ctx, 'password_again')) return again(ct(lang, 'passwords_differ'));
  const result = await acceptInvite(deps.db, deps.cipher, { token, password, code: field(ctx, 'code').trim(), now });
  if (result === 'invalid_code') return again(ct(lang, 'bad_code'));
  if (result === 'invalid_invite') return message(ctx, 404, 'invite_title', 'invite_invalid');
  const user = (await userById(deps.db, result.user.id))!;
  const session = await startSession(deps.db, user, {
    now,
    ip: ctx.ip,
    userAgent: ctx.get('user-agent'),
    complete: true,
  });
  setSessionCookie(ctx, session.token);
  await audit(deps.db, ctx, { user, action: 'invite_accept', target: invite.id, outcome: 'success', at: now });
  render(
    ctx,
    201,
    ct(lang, 'recovery_title'),
    html`<p>${ct(lang, 'recovery_help')}</p>
      <ul class="recovery" id="recovery-codes">
        ${result.recoveryCodes.map((c) => html`<li>${c}</li>`)}
      </ul>
      <p><a href="/console">${ct(lang, 'recovery_done')}</a></p>`,
  );
}
