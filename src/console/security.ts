import { createHmac, randomBytes } from 'node:crypto';
import type { Context, Middleware } from 'koa';
import { constantTimeEqual } from '../lib/hash';

/** The session cookie: `__Host-` (Secure, Path=/, no Domain), HttpOnly, SameSite=Strict. */
export const SESSION_COOKIE = '__Host-console_session';
/** Before sign-in, the CSRF token is a double-submit cookie of its own (SameSite=Strict too). */
export const PRE_SESSION_CSRF_COOKIE = '__Host-console_csrf';
/** The merchant pages' test/live preference (`test` or `live`; absent is test), same flags. */
export const MODE_COOKIE = '__Host-console_mode';
/** Names the form field every state-changing form carries. */
export const CSRF_FIELD = 'csrf_token';

/** The console's response headers: a strict CSP (no inline script, no eval), no framing, HSTS, nosniff. */
export const securityHeaders: Middleware = async (ctx, next) => {
  ctx.set(
    'Content-Security-Policy',
    [
      "default-src 'none'",
      "script-src 'self'",
      "style-src 'self'",
      "img-src 'self' data:",
      "connect-src 'self'",
      "form-action 'self'",
      "frame-ancestors 'none'",
      "base-uri 'none'",
    ].join('; '),
  );
  ctx.set('Strict-Transport-Security', 'max-age=63072000; includeSubDomains');
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.set('X-Frame-Options', 'DENY');
  ctx.set('Referrer-Policy', 'same-origin');
  ctx.set('Cross-Origin-Opener-Policy', 'same-origin');
  ctx.set('Cross-Origin-Resource-Policy', 'same-origin');
  ctx.set('Permissions-Policy', 'camera=(), microphone=(), geolocation=(), payment=()');
  ctx.set('Cache-Control', 'no-store');
  await next();
};

/** Sets a `__Host-` cookie: Secure, HttpOnly, Path=/, SameSite=Strict; `maxAgeSeconds` 0 deletes it. */
export function setHostCookie(ctx: Context, name: string, value: string, maxAgeSeconds: number | null): void {
  const parts = [
    `${name}=${value}`,
    'Path=/',
    ...(maxAgeSeconds === null ? [] : [`Max-Age=${maxAgeSeconds}`]),
    'Secure',
    'HttpOnly',
    'SameSite=Strict',
  ];
  ctx.append('Set-Cookie', parts.join('; '));
}

/** The CSRF token of a signed-in session: an HMAC of its cookie token, so nothing more is stored. */
export const sessionCsrfToken = (sessionToken: string): string =>
  createHmac('sha256', sessionToken).update('console csrf').digest('base64url');

/** The pre-session CSRF token, set as a cookie when the page has none yet. */
export function preSessionCsrfToken(ctx: Context, current: string | undefined): string {
  if (current && /^[A-Za-z0-9_-]{43}$/.test(current)) return current;
  const token = randomBytes(32).toString('base64url');
  setHostCookie(ctx, PRE_SESSION_CSRF_COOKIE, token, null);
  return token;
}

/**
 * A state change must come from a page of the console's own origin: `Sec-Fetch-Site` (when the
 * browser sends it) is `same-origin`, and `Origin` is the console's. A request with neither is
 * refused too (every browser the console supports sends `Origin` on a form post).
 */
export function sameOrigin(ctx: Context, origin: string): boolean {
  const site = ctx.get('sec-fetch-site');
  if (site && site !== 'same-origin') return false;
  const sent = ctx.get('origin');
  return sent === origin;
}

export const csrfMatches = (sent: unknown, expected: string): boolean =>
  typeof sent === 'string' && sent.length > 0 && constantTimeEqual(sent, expected);
