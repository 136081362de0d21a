import type { Context } from 'koa';
import { ATTEMPT_ID, HostedDeps } from './deps';
import { clientMessages, t } from './i18n';
import type { MessageKey } from './locales/en';
import { attemptOwner, Owner } from './owners';
import { PageResponse, scriptMessages } from './page-response';
import type { AttemptLookup, TestGatewayRead } from './public-types';
import { gatewayContent } from './templates/gateway';
import { returnPendingContent, returnSucceededContent } from './templates/return';

const FORM_LIMIT = 1024;

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
export async function gatewayPage(deps: HostedDeps, ctx: Context, error: MessageKey | null = null): Promise<void> {
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
export async function gatewayDecide(deps: HostedDeps, ctx: Context): Promise<void> {
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

/** A small url-encoded form body; null when it is larger than any button's form. */
function readForm(ctx: Context): Promise<string | null> {
  return new Promise((resolve, reject) => {
    let text = '';
    let tooLarge = false;
    ctx.req.setEncoding('utf8');
    ctx.req.on('data', (chunk: string) => {
      if (text.length + chunk.length > FORM_LIMIT) tooLarge = true;
      else text += chunk;
    });
    ctx.req.on('end', () => resolve(tooLarge ? null : text));
    ctx.req.on('error', reject);
  });
}

/** `/r/<attempt_id>`: asks the API to verify, then the merchant's success_url or back to the checkout page. */
export async function returnPage(deps: HostedDeps, ctx: Context): Promise<void> {
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
