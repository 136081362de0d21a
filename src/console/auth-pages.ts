import type { Context } from 'koa';
import { html } from '../hosted/html';
import { hit } from '../http/rate-limit';
import { acceptInvite, checkPassword, checkSecondFactor, openInvite, userById } from './accounts';
import { audit } from './audit';
import { ConsoleDeps, message, render, stateOf } from './context';
import { csrfField, notice } from './layout';
import { ct } from './messages';
import { passwordProblem } from './passwords';
import { SESSION_COOKIE, setHostCookie, sessionCsrfToken } from './security';
import { totpUri } from './totp';
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

function codeForm(
  ctx: Context,
  status: number,
  action: string,
  title: string,
  help: string,
  error: string | null,
  withPassword = false,
) {
  const { lang, csrf } = stateOf(ctx);
  render(
    ctx,
    status,
    title,
    html`${notice('error', error)}
      <p>${help}</p>
      <form method="post" action="${action}" class="stack">
        ${csrfField(csrf)}
        ${
          withPassword &&
          html`<label
            >${ct(lang, 'password')} <input type="password" name="password" autocomplete="current-password" required
          /></label>`
        }
        <label
          >${ct(lang, 'code')} <input type="text" name="code" inputmode="numeric" autocomplete="one-time-code" required
        /></label>
        <button type="submit">${ct(lang, 'verify')}</button>
      </form>`,
  );
}

export function verifyPage(ctx: Context) {
  const { lang, session } = stateOf(ctx);
  if (session?.complete) return ctx.redirect('/console');
  if (!session) return message(ctx, 401, 'sign_in', 'expired_step');
  codeForm(ctx, 200, '/console/sign-in/verify', ct(lang, 'verify_title'), ct(lang, 'verify_help'), null);
}

export async function verify(deps: ConsoleDeps, ctx: Context) {
  const { lang, session } = stateOf(ctx);
  const now = deps.clock();
  if (!session || session.complete) return message(ctx, 401, 'sign_in', 'expired_step');
  const tries = await hit(deps.db, `console-2fa:${session.id}`, SIGN_IN_LIMITS.perSession, now);
  if (!tries.allowed) {
    await audit(deps.db, ctx, { user: session.user, action: 'second_factor', outcome: 'denied', at: now });
    await revokeSession(deps.db, session.user.id, session.id, now);
    return throttled(ctx, tries.retryAfter, () => message(ctx, 429, 'sign_in', 'expired_step'));
  }
  const factor = await checkSecondFactor(deps.db, deps.cipher, session.user.id, field(ctx, 'code'), now);
  if (!factor) {
    await audit(deps.db, ctx, { user: session.user, action: 'second_factor', outcome: 'failed', at: now });
    return codeForm(
      ctx,
      401,
      '/console/sign-in/verify',
      ct(lang, 'verify_title'),
      ct(lang, 'verify_help'),
      ct(lang, 'bad_code'),
    );
  }
  const token = await completeSession(deps.db, session.id, now);
  setSessionCookie(ctx, token);
  await audit(deps.db, ctx, {
    user: session.user,
    action: 'sign_in',
    outcome: 'success',
    target: session.id,
    detail: { factor },
    at: now,
  });
  ctx.status = 303;
  ctx.redirect('/console');
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

export function reauthPage(ctx: Context) {
  const { lang } = stateOf(ctx);
  const next = safeNext(ctx.query.next);
  codeForm(
    ctx,
    200,
    `/console/reauth?next=${encodeURIComponent(next)}`,
    ct(lang, 'reauth_title'),
    ct(lang, 'reauth_help', { minutes: REAUTH_WINDOW_MS / 60_000 }),
    null,
    true,
  );
}

export async function reauth(deps: ConsoleDeps, ctx: Context) {
  const { lang, session } = stateOf(ctx);
  const s = session!;
  const now = deps.clock();
  const next = safeNext(ctx.query.next);
  const again = (status: number, error: string) =>
    codeForm(
      ctx,
      status,
      `/console/reauth?next=${encodeURIComponent(next)}`,
      ct(lang, 'reauth_title'),
      ct(lang, 'reauth_help', { minutes: REAUTH_WINDOW_MS / 60_000 }),
      error,
      true,
    );
  const tries = await hit(deps.db, `console-2fa:${s.id}`, SIGN_IN_LIMITS.perSession, now);
  if (!tries.allowed)
    return throttled(ctx, tries.retryAfter, () =>
      again(429, ct(lang, 'throttled', { minutes: Math.ceil(tries.retryAfter / 60) })),
    );
  const byPassword = await checkPassword(deps.db, s.user.email, field(ctx, 'password'));
  const factor = byPassword && (await checkSecondFactor(deps.db, deps.cipher, s.user.id, field(ctx, 'code'), now));
  if (!byPassword || !factor) {
    await audit(deps.db, ctx, { user: s.user, action: 'reauthenticate', outcome: 'failed', at: now });
    return again(401, ct(lang, byPassword ? 'bad_code' : 'bad_credentials'));
  }
  await markReauthenticated(deps.db, s.id, now);
  await audit(deps.db, ctx, {
    user: s.user,
    action: 'reauthenticate',
    outcome: 'success',
    detail: { factor },
    at: now,
  });
  ctx.status = 303;
  ctx.redirect(next);
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
