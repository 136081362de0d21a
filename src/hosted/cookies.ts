import type { Context } from 'koa';

/** The customer token of session `code` (HTTP-only: page scripts never see it). */
export const tokenCookie = (code: string) => `svc_ctok_${code}`;
/** The last payment attempt started on session `code` in this browser (for the processing and done screens). */
export const attemptCookie = (code: string) => `svc_att_${code}`;
/** The language the shopper picked with the switch. */
export const LANG_COOKIE = 'svc_lang';

/** A cookie's value from the request, or undefined. */
export function readCookie(ctx: Context, name: string): string | undefined {
  for (const part of ctx.get('cookie').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) {
      try {
        return decodeURIComponent(part.slice(eq + 1).trim());
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

/**
 * Sets an HTTP-only, SameSite=Lax cookie for the whole site; `Secure` when the hosted page is
 * served over https (PUBLIC_BASE_URL), whatever the hop from the load balancer was.
 */
export function writeCookie(
  ctx: Context,
  name: string,
  value: string,
  opts: { maxAgeSeconds: number; secure: boolean },
) {
  const parts = [
    `${name}=${encodeURIComponent(value)}`,
    'Path=/',
    `Max-Age=${Math.max(0, Math.floor(opts.maxAgeSeconds))}`,
    'HttpOnly',
    'SameSite=Lax',
    ...(opts.secure ? ['Secure'] : []),
  ];
  ctx.append('Set-Cookie', parts.join('; '));
}
