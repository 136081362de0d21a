/**
 * Payments: a merchant's Checkout sessions of the session's mode, through the Checkout API's own
 * queries (`GET /v1/checkout/sessions`, `GET /v1/refunds`, `GET /v1/events`), and refunds through
 * `POST /v1/refunds`' service (`createRefund`), with its rules and its idempotency.
 */
import { randomBytes } from 'node:crypto';
import type { Context } from 'koa';
import { checkoutCursor, listOut } from '../checkout/cursor';
import { EventRow, listEvents } from '../checkout/events';
import { isObjectId } from '../checkout/ids';
import { Payment, requestRefund, reservedAmount } from '../checkout/refunds/create-refund';
import { listRefunds } from '../checkout/refunds/queries';
import type { RefundRow } from '../checkout/refunds/refund-row';
import { refundIn, sessionStatuses } from '../checkout/schemas';
import { getSession, listSessions } from '../checkout/sessions/queries';
import type { SessionRow } from '../checkout/sessions/session-row';
import type { AttemptRow } from '../checkout/attempts/attempt-row';
import { html } from '../hosted/html';
import { ApiError } from '../http/errors';
import { iso } from '../lib/time';
import { audit } from './audit';
import { dayAfter, dayOf } from './days';
import { ConsoleDeps, forbidden, notFound, render, stateOf } from './context';
import { csrfField, notice, scrollRegion } from './layout';
import { ct } from './messages';
import { allowed } from './roles';
import { scopeOf } from './webhook-pages';

export const PAYMENTS = '/console/payments';
/** Sessions per page. */
export const SESSIONS_PER_PAGE = 50;
/** A session's refunds shown (the API pages them 100 at most). */
const REFUNDS_SHOWN = 100;
/** Events read from the session's creation on, oldest first, to find the session's own (payloads are not searchable in SQL). */
const TIMELINE_EVENTS_READ = 2_000;
const TIMELINE_PAGE = 500;

/** A session's page, or the list for anything that is not an object id (a `next` for re-authentication). */
export const sessionPath = (id: string) => (isObjectId(id) ? `${PAYMENTS}/${id}` : PAYMENTS);
/** A fresh Idempotency-Key per refund form shown: posting the same form twice refunds once. */
const requestKey = () => `console_${randomBytes(16).toString('base64url')}`;
const queryOf = (ctx: Context, name: string) => (typeof ctx.query[name] === 'string' ? ctx.query[name].trim() : '');
const money = (amount: number | null | undefined, currency: string | null | undefined) =>
  amount === null || amount === undefined ? '—' : `${amount} ${currency ?? ''}`.trim();

/** The sessions of this mode, newest first, by status, reference id and created date (UTC days), or the one with an id. */
export async function sessionsPage(deps: ConsoleDeps, ctx: Context) {
  const { lang } = stateOf(ctx);
  const scope = scopeOf(ctx);
  const askedStatus = queryOf(ctx, 'status');
  const status = (sessionStatuses as readonly string[]).includes(askedStatus) ? askedStatus : undefined;
  const referenceId = queryOf(ctx, 'reference_id').slice(0, 128) || undefined;
  const search = queryOf(ctx, 'q');
  const fromText = queryOf(ctx, 'from');
  const toText = queryOf(ctx, 'to');
  const from = dayOf(fromText);
  const to = dayOf(toText);
  const form = html`<form method="get" action="${PAYMENTS}" class="stack" role="search">
    <label
      >${ct(lang, 'search_session_id')}
      <input type="search" name="q" value="${search}" maxlength="100" autocomplete="off"
    /></label>
    <label
      >${ct(lang, 'status')}
      <select name="status">
        <option value="">${ct(lang, 'all')}</option>
        ${sessionStatuses.map((s) => html`<option value="${s}" ${s === status ? html`selected` : ''}>${s}</option>`)}
      </select></label
    >
    <label
      >${ct(lang, 'reference_id')} <input type="text" name="reference_id" value="${referenceId ?? ''}" maxlength="128"
    /></label>
    <label>${ct(lang, 'created_from')} <input type="date" name="from" value="${fromText}" /></label>
    <label>${ct(lang, 'created_to')} <input type="date" name="to" value="${toText}" /></label>
    <button type="submit" class="secondary">${ct(lang, 'filter')}</button>
  </form>`;
  const refused = (text: string) =>
    render(ctx, 422, ct(lang, 'payments_title'), html`${notice('error', text)} ${form}`, PAYMENTS);
  if (from === null || to === null) return refused(ct(lang, 'bad_date'));

  let rows: SessionRow[];
  let nextCursor: string | null = null;
  if (search) {
    // The id search reads through the API's single read: another merchant's or mode's is none.
    const one = await getSession(deps.db, scope, search);
    rows = one ? [one] : [];
  } else {
    try {
      const page = await listSessions(deps.db, scope, {
        status,
        referenceId,
        // `from` is inclusive (the API's created_after is exclusive), `to` takes its whole day.
        createdAfter: from && new Date(from.getTime() - 1),
        createdBefore: to && dayAfter(to),
        after: checkoutCursor('sessions', queryOf(ctx, 'cursor') || undefined),
        limit: SESSIONS_PER_PAGE,
      });
      rows = page.rows;
      nextCursor = listOut('sessions', page, (s) => s).next_cursor;
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 400) throw err;
      return refused(ct(lang, 'bad_cursor'));
    }
  }
  const next = new URLSearchParams({
    ...(status && { status }),
    ...(referenceId && { reference_id: referenceId }),
    ...(fromText && { from: fromText }),
    ...(toText && { to: toText }),
    ...(nextCursor && { cursor: nextCursor }),
  });
  render(
    ctx,
    200,
    ct(lang, 'payments_title'),
    html`${form}
    ${
      rows.length === 0
        ? html`<p>${ct(lang, 'no_sessions')}</p>`
        : html`<div ${scrollRegion(ct(lang, 'payments_title'))}>
            <table>
              <thead>
                <tr>
                  <th>${ct(lang, 'session_id')}</th>
                  <th>${ct(lang, 'amount')}</th>
                  <th>${ct(lang, 'status')}</th>
                  <th>${ct(lang, 'payment_status')}</th>
                  <th>${ct(lang, 'reference_id')}</th>
                  <th>${ct(lang, 'created')}</th>
                </tr>
              </thead>
              <tbody>
                ${rows.map(
                  (s) =>
                    html`<tr id="session-${s.id}">
                      <td class="mono"><a href="${PAYMENTS}/${s.id}">${s.id}</a></td>
                      <td class="mono">${money(s.amount, s.currency)}</td>
                      <td>${s.status}</td>
                      <td>${s.payment_status}</td>
                      <td class="mono">${s.reference_id}</td>
                      <td class="mono">${iso(s.created_at)}</td>
                    </tr>`,
                )}
              </tbody>
            </table>
          </div>`
    }
    ${nextCursor && html`<p><a href="${PAYMENTS}?${next.toString()}">${ct(lang, 'older_sessions')}</a></p>`}`,
    PAYMENTS,
  );
}

/** The session's own events (the session itself, or a refund of it), oldest first, from the event log of its mode. */
async function timelineOf(deps: ConsoleDeps, ctx: Context, session: SessionRow): Promise<EventRow[]> {
  const found: EventRow[] = [];
  let after: { createdAt: string; id: string } | undefined;
  for (let read = 0; read < TIMELINE_EVENTS_READ; read += TIMELINE_PAGE) {
    const page = await listEvents(deps.db, scopeOf(ctx), {
      since: new Date(new Date(session.created_at).getTime() - 60_000),
      after,
      limit: TIMELINE_PAGE,
      order: 'asc',
    });
    for (const e of page.rows) {
      const object = e.data_object as { id?: unknown; session_id?: unknown } | null;
      if (object?.id === session.id || object?.session_id === session.id) found.push(e);
    }
    const last = page.rows[page.rows.length - 1];
    if (!page.hasMore || !last) break;
    after = { createdAt: new Date(last.created_at).toISOString(), id: last.id };
  }
  return found;
}

type PageOpts = { status?: number; ok?: string | null; error?: string | null };

/** The session: amount, status, its attempts, its refunds, what is left to refund (the form), its event timeline. */
export async function sessionPage(deps: ConsoleDeps, ctx: Context, opts: PageOpts = {}) {
  const { lang, csrf, session: consoleSession } = stateOf(ctx);
  const scope = scopeOf(ctx);
  const session = await getSession(deps.db, scope, String(ctx.params.sessionId));
  if (!session) return notFound(ctx);
  const attempts: AttemptRow[] = await deps
    .db('payment_attempts')
    .where({ session_id: session.id, merchant_id: scope.merchantId, mode: scope.mode })
    .orderBy([
      { column: 'created_at', order: 'asc' },
      { column: 'id', order: 'asc' },
    ]);
  const refunds = (await listRefunds(deps.db, scope, { sessionId: session.id, limit: REFUNDS_SHOWN })).rows;
  const payment = session.payment as Payment | null;
  const captured = payment?.captured_amount ?? null;
  // As the refund service counts it: captured minus every refund requested or settled.
  const left = captured === null ? null : captured - (await reservedAmount(deps.db, session.id));
  const currency = payment?.captured_currency ?? session.currency;
  const timeline = await timelineOf(deps, ctx, session);
  const mayRefund =
    allowed(consoleSession!.user.role, 'refunds.create') && session.status === 'completed' && left !== null && left > 0;
  const refundRow = (r: RefundRow) =>
    html`<tr id="refund-${r.id}">
      <td class="mono">${r.id}</td>
      <td class="mono">${money(r.amount, r.currency)}</td>
      <td>${r.status}${r.failure_reason ? html` (${r.failure_reason})` : ''}</td>
      <td>${r.reason}</td>
      <td class="mono">${iso(r.created_at)}</td>
    </tr>`;
  render(
    ctx,
    opts.status ?? 200,
    ct(lang, 'session_title', { id: session.id }),
    html`${notice('ok', opts.ok)} ${notice('error', opts.error)}
      <p><a href="${PAYMENTS}">${ct(lang, 'back_to_payments')}</a></p>
      <dl class="facts">
        <dt>${ct(lang, 'amount')}</dt>
        <dd class="mono" id="session-amount">${money(session.amount, session.currency)}</dd>
        <dt>${ct(lang, 'status')}</dt>
        <dd id="session-status">${session.status}</dd>
        <dt>${ct(lang, 'payment_status')}</dt>
        <dd id="session-payment-status">${session.payment_status}</dd>
        <dt>${ct(lang, 'reference_id')}</dt>
        <dd class="mono">${session.reference_id}</dd>
        <dt>${ct(lang, 'captured')}</dt>
        <dd class="mono">${money(captured, currency)}</dd>
        <dt>${ct(lang, 'left_to_refund')}</dt>
        <dd class="mono" id="left-to-refund">${money(left, currency)}</dd>
        <dt>${ct(lang, 'created')}</dt>
        <dd class="mono">${iso(session.created_at)}</dd>
      </dl>
      <h2>${ct(lang, 'attempts')}</h2>
      ${
        attempts.length === 0
          ? html`<p>${ct(lang, 'no_attempts')}</p>`
          : html`<div ${scrollRegion(ct(lang, 'attempts'))}>
              <table>
                <thead>
                  <tr>
                    <th>${ct(lang, 'attempt')}</th>
                    <th>${ct(lang, 'method')}</th>
                    <th>${ct(lang, 'status')}</th>
                    <th>${ct(lang, 'created')}</th>
                    <th>${ct(lang, 'resolved')}</th>
                  </tr>
                </thead>
                <tbody>
                  ${attempts.map(
                    (a) =>
                      html`<tr id="attempt-${a.id}">
                        <td class="mono">${a.id}</td>
                        <td>${a.method}</td>
                        <td>${a.status}${a.failure_reason ? html` (${a.failure_reason})` : ''}</td>
                        <td class="mono">${iso(a.created_at)}</td>
                        <td class="mono">${iso(a.resolved_at) ?? '—'}</td>
                      </tr>`,
                  )}
                </tbody>
              </table>
            </div>`
      }
      <h2>${ct(lang, 'refunds')}</h2>
      ${
        refunds.length === 0
          ? html`<p>${ct(lang, 'no_refunds')}</p>`
          : html`<div ${scrollRegion(ct(lang, 'refunds'))}>
              <table>
                <thead>
                  <tr>
                    <th>${ct(lang, 'refund')}</th>
                    <th>${ct(lang, 'amount')}</th>
                    <th>${ct(lang, 'status')}</th>
                    <th>${ct(lang, 'reason')}</th>
                    <th>${ct(lang, 'created')}</th>
                  </tr>
                </thead>
                <tbody>
                  ${refunds.map(refundRow)}
                </tbody>
              </table>
            </div>`
      }
      ${
        mayRefund &&
        html`<h2>${ct(lang, 'refund_title')}</h2>
          <form method="post" action="${PAYMENTS}/${session.id}/refunds" class="stack">
            ${csrfField(csrf)}
            <input type="hidden" name="request_key" value="${requestKey()}" />
            <label
              >${ct(lang, 'refund_amount', { currency })}
              <input type="number" name="amount" min="1" max="${left}" step="1" value="${left}" required
            /></label>
            <label>${ct(lang, 'reason_optional')} <input type="text" name="reason" maxlength="500" /></label>
            <button type="submit" class="danger">${ct(lang, 'refund_submit')}</button>
          </form>`
      }
      <h2>${ct(lang, 'timeline')}</h2>
      ${
        timeline.length === 0
          ? html`<p>${ct(lang, 'no_events')}</p>`
          : html`<ol class="events" id="timeline">
              ${timeline.map(
                (e) =>
                  html`<li id="event-${e.id}">
                    <span class="mono">${iso(e.created_at)}</span> <strong class="mono">${e.type}</strong>
                    <a class="mono" href="/console/developers/events">${e.id}</a>
                  </li>`,
              )}
            </ol>`
      }`,
    PAYMENTS,
  );
}

const audited = (
  deps: ConsoleDeps,
  ctx: Context,
  target: string,
  outcome: 'success' | 'denied' | 'failed',
  detail?: Record<string, unknown>,
) =>
  audit(deps.db, ctx, {
    user: stateOf(ctx).session!.user,
    action: 'refund_create',
    target,
    outcome,
    detail: outcome === 'denied' ? undefined : { mode: stateOf(ctx).mode, ...detail },
    at: deps.clock(),
  });

/**
 * Refunds the session (re-authenticated) through `POST /v1/refunds`' service, with the form's
 * Idempotency-Key: the same form posted twice refunds once. The service's refusals (over-refund
 * 409, not refundable 422, …) are shown with the API's message and status; another merchant's or
 * mode's session (or none) is 403, audited, nothing done.
 */
export async function refundAction(deps: ConsoleDeps, ctx: Context) {
  const { lang, form } = stateOf(ctx);
  const scope = scopeOf(ctx);
  const sessionId = String(ctx.params.sessionId);
  if (!(await getSession(deps.db, scope, sessionId))) {
    await audited(deps, ctx, sessionId.slice(0, 100), 'denied');
    return forbidden(ctx);
  }
  const amountText = (form.get('amount') ?? '').trim();
  const reason = (form.get('reason') ?? '').trim();
  const parsed = refundIn.safeParse({
    session_id: sessionId,
    amount: /^\d{1,16}$/.test(amountText) ? Number(amountText) : NaN,
    ...(reason && { reason }),
  });
  if (!parsed.success) return sessionPage(deps, ctx, { status: 422, error: ct(lang, 'refund_amount_invalid') });
  const input = parsed.data;
  const key = (form.get('request_key') || requestKey()).slice(0, 255);
  const merchant = await deps.db('merchants').where({ id: scope.merchantId }).first('display_name');
  let refund: RefundRow;
  let replayed: boolean;
  try {
    ({ refund, replayed } = await requestRefund(
      deps.sessions,
      { ...scope, merchantName: merchant?.display_name },
      input,
      key,
      // As the API's idempotency: the same request finds its refund, the same key with another
      // request is refused (409), checked inside the service's transaction.
      { keyNamesOneRequest: true },
    ));
  } catch (err) {
    if (!(err instanceof ApiError) || err.status >= 500) throw err;
    await audited(deps, ctx, sessionId, 'failed', { amount: input.amount, code: err.code });
    return sessionPage(deps, ctx, { status: err.status, error: err.message });
  }
  if (replayed) {
    return sessionPage(deps, ctx, {
      ok: ct(lang, 'refund_already', { refund: refund.id, amount: money(refund.amount, refund.currency) }),
    });
  }
  await audited(deps, ctx, sessionId, 'success', {
    refund_id: refund.id,
    amount: refund.amount,
    currency: refund.currency,
  });
  return sessionPage(deps, ctx, {
    status: 201,
    ok: ct(lang, 'refund_requested', { refund: refund.id, amount: money(refund.amount, refund.currency) }),
  });
}
