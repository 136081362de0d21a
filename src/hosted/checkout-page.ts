import type { Context } from 'koa';
import { otpRules } from '../checkout/public-limits';
import { SESSION_CODE } from '../checkout/schemas';
import { attemptCookie, readCookie, tokenCookie } from './cookies';
import { ATTEMPT_ID, HostedDeps } from './deps';
import { clientMessages, failureMessage, t } from './i18n';
import { sessionOwner } from './owners';
import { PageResponse, scriptMessages } from './page-response';
import type { AttemptPoll, PublicSession } from './public-types';
import { checkoutContent } from './templates/checkout';
import { completedContent, processingContent } from './templates/outcomes';

/** `/c/<code>`: the checkout page, or the screen for the session's state. */
export async function checkoutPage(deps: HostedDeps, ctx: Context): Promise<void> {
  const code = String(ctx.params.code);
  const owner = SESSION_CODE.test(code) ? await sessionOwner(deps.db, code) : undefined;
  const out = new PageResponse(ctx, deps.secureCookies, owner?.locale ?? null);
  if (!owner) return out.notFound();
  const key = await deps.keys.forMerchant(owner.merchant_id, owner.mode);
  const customerToken = readCookie(ctx, tokenCookie(code));
  const call = (path: string) => deps.api({ method: 'GET', path, key, customerToken, clientIp: ctx.ip });

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
    const statusHref = attemptId ? `/r/${attemptId}` : `/c/${code}`;
    return out.send(200, { ...frame, title: t(out.lang, 'processing_title') }, processingContent(out.lang, statusHref));
  }
  if (session.status === 'completed') {
    const offline = session.payment_status === 'requires_offline_collection';
    const title = t(out.lang, offline ? 'cod_title' : 'paid_title');
    return out.send(200, { ...frame, title }, completedContent(out.lang, session, await poll()));
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
