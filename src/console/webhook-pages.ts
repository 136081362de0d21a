/** Developers › Webhooks: a merchant's endpoints and deliveries, through the webhook API's own services. */
import { randomBytes } from 'node:crypto';
import type { Context } from 'koa';
import { eventTypes, EventType } from '../checkout/events';
import { Html, html } from '../hosted/html';
import { ApiError } from '../http/errors';
import { iso } from '../lib/time';
import type { MerchantScope } from '../webhooks/deps';
import type { EndpointRow } from '../webhooks/endpoint-row';
import { createEndpoint, getEndpoint, listEndpoints, rotateSecret, updateEndpoint } from '../webhooks/endpoints';
import { redeliverEvent } from '../webhooks/redeliver';
import { replayWindow } from '../webhooks/replay-window';
import { endpointIn, endpointPatch, replayIn } from '../webhooks/schemas';
import { sendTestEvent } from '../webhooks/test-event';
import { audit } from './audit';
import {
  deliveryCursor,
  deliveryState,
  DeliveryState,
  deliveryStates,
  listDeliveries,
  type ListedDelivery,
} from './delivery-list';
import { ConsoleDeps, forbidden, notFound, render, stateOf } from './context';
import { csrfField, notice, scrollRegion } from './layout';
import { ConsoleMessageKey, ct } from './messages';

export const WEBHOOKS = '/console/developers/webhooks';

/** The signed-in merchant user's merchant and the session's mode: every query here takes both. */
export const scopeOf = (ctx: Context): MerchantScope => ({
  merchantId: stateOf(ctx).session!.user.merchant_id!,
  mode: stateOf(ctx).mode,
});
const form = (ctx: Context) => stateOf(ctx).form;
/** A fresh Idempotency-Key per form shown: posting the same form twice converges on one result. */
const requestKey = () => `console_${randomBytes(16).toString('base64url')}`;

type PageOpts = { status?: number; ok?: string | null; error?: string | null; shown?: Html | null };

function eventBoxes(ctx: Context, checked: readonly string[], idPrefix: string): Html {
  const { lang } = stateOf(ctx);
  return html`<fieldset>
    <legend>${ct(lang, 'event_types')}</legend>
    ${['*', ...eventTypes].map(
      (t) =>
        html`<label
          ><input
            type="checkbox"
            name="events"
            value="${t}"
            id="${idPrefix}-${t}"
            ${checked.includes(t) ? html`checked` : ''}
          />
          <span class="mono">${t === '*' ? ct(lang, 'all_events') : t}</span></label
        >`,
    )}
  </fieldset>`;
}

/** Why an endpoint is in the state it is, in words (failing since, disabled and why). */
function endpointState(ctx: Context, e: EndpointRow): Html {
  const { lang } = stateOf(ctx);
  if (e.status === 'disabled')
    return html`<p class="notice notice-error" id="endpoint-state">
      ${ct(lang, e.disabled_reason ? 'endpoint_disabled_auto' : 'endpoint_disabled_manual', {
        reason: e.disabled_reason ?? '',
      })}
    </p>`;
  if (e.failing_since)
    return html`<p class="notice notice-error" id="endpoint-state">
      ${ct(lang, 'endpoint_failing', { since: iso(e.failing_since), error: e.last_error ?? '' })}
    </p>`;
  return html`<p id="endpoint-state">${ct(lang, 'endpoint_healthy')}</p>`;
}

/** Developers › Webhooks: the endpoints of the merchant in this mode, and the create form. */
export async function webhooksPage(deps: ConsoleDeps, ctx: Context, opts: PageOpts = {}) {
  const { lang, csrf, mode } = stateOf(ctx);
  const endpoints = await listEndpoints(deps.webhooks, scopeOf(ctx));
  render(
    ctx,
    opts.status ?? 200,
    ct(lang, 'webhooks_title'),
    html`${notice('ok', opts.ok)} ${notice('error', opts.error)} ${opts.shown ?? null}
      ${
        endpoints.length === 0
          ? html`<p>${ct(lang, 'no_endpoints')}</p>`
          : html`<div ${scrollRegion(ct(lang, 'webhooks_title'))}>
              <table>
                <thead>
                  <tr>
                    <th>URL</th>
                    <th>${ct(lang, 'event_types')}</th>
                    <th>${ct(lang, 'status')}</th>
                    <th>${ct(lang, 'created')}</th>
                  </tr>
                </thead>
                <tbody>
                  ${endpoints.map(
                    (e) =>
                      html`<tr id="endpoint-${e.id}">
                        <td><a href="${WEBHOOKS}/${e.id}" class="mono">${e.url}</a></td>
                        <td class="mono">${e.events.join(', ')}</td>
                        <td>
                          ${
                            e.status === 'disabled'
                              ? ct(lang, 'disabled')
                              : e.failing_since
                                ? ct(lang, 'failing')
                                : ct(lang, 'enabled')
                          }
                        </td>
                        <td class="mono">${iso(e.created_at)}</td>
                      </tr>`,
                  )}
                </tbody>
              </table>
            </div>`
      }
      <h2>${ct(lang, 'add_endpoint')}</h2>
      <form method="post" action="${WEBHOOKS}" class="stack">
        ${csrfField(csrf)}
        <input type="hidden" name="request_key" value="${requestKey()}" />
        <label>URL <input type="url" name="url" required maxlength="2048" /></label>
        <label>${ct(lang, 'description')} <input type="text" name="description" maxlength="200" /></label>
        ${eventBoxes(ctx, [], 'new')}
        <p>${ct(lang, 'endpoint_mode', { mode })}</p>
        <button type="submit">${ct(lang, 'add_endpoint')}</button>
      </form>`,
    WEBHOOKS,
  );
}

/** A new or rotated secret, shown once. */
function secretShown(ctx: Context, secret: string, overlapEnds: Date | null): Html {
  const { lang } = stateOf(ctx);
  return html`<section aria-labelledby="new-secret">
    <h2 id="new-secret">${ct(lang, 'signing_secret')}</h2>
    <p>${ct(lang, 'secret_shown_once')}</p>
    <p class="secret" id="new-secret-value">${secret}</p>
    ${overlapEnds && html`<p id="overlap-end">${ct(lang, 'secret_overlap', { until: iso(overlapEnds) })}</p>`}
  </section>`;
}

const queryOf = (ctx: Context, name: string) => (typeof ctx.query[name] === 'string' ? ctx.query[name] : '');

/** The deliveries' filter: all, or only the delivered, pending or failed attempts (links, the chosen one marked). */
function deliveryFilter(ctx: Context, base: string, chosen: DeliveryState | undefined): Html {
  const { lang } = stateOf(ctx);
  const link = (state: DeliveryState | undefined) => {
    const href = state ? `${base}?state=${state}` : base;
    const label = ct(lang, state ? (`dl_${state}` as ConsoleMessageKey) : 'all');
    return html`<li>
      <a href="${href}" ${state === chosen ? html`aria-current="page"` : ''}>${label}</a>
    </li>`;
  };
  return html`<nav aria-label="${ct(lang, 'dl_filter_label')}">
    <ul class="tabs">
      ${[undefined, ...deliveryStates].map(link)}
    </ul>
  </nav>`;
}

/**
 * One endpoint: its state explained, its settings, its actions and its deliveries, newest first,
 * a page at a time (`cursor`), all or only the delivered, pending or failed ones (`state`).
 */
export async function endpointPage(deps: ConsoleDeps, ctx: Context, opts: PageOpts = {}) {
  const { lang, csrf } = stateOf(ctx);
  const scope = scopeOf(ctx);
  let e: EndpointRow;
  try {
    e = await getEndpoint(deps.webhooks, scope, String(ctx.params.endpointId));
  } catch (err) {
    // As the seller pages: a page of another tenant's (or mode's) object is 404, an action on it 403.
    if (err instanceof ApiError && err.status === 404) return notFound(ctx);
    throw err;
  }
  const base = `${WEBHOOKS}/${e.id}`;
  const asked = queryOf(ctx, 'state');
  const state = (deliveryStates as readonly string[]).includes(asked) ? (asked as DeliveryState) : undefined;
  let deliveries: ListedDelivery[];
  let nextCursor: string | null;
  try {
    // The endpoint is the merchant's in this mode (read above); its id names its rows alone.
    ({ rows: deliveries, nextCursor } = await listDeliveries(deps.db, {
      endpointId: e.id,
      mode: e.mode,
      now: deps.clock(),
      state,
      after: deliveryCursor(queryOf(ctx, 'cursor') || undefined),
    }));
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 400) throw err;
    return render(
      ctx,
      422,
      ct(lang, 'endpoint_title', { url: e.url }),
      html`${notice('error', ct(lang, 'bad_cursor'))}
        <p><a href="${base}">${ct(lang, 'dl_newest')}</a></p>`,
      WEBHOOKS,
    );
  }
  const older = nextCursor && new URLSearchParams({ ...(state && { state }), cursor: nextCursor });
  const dayAgo = new Date(deps.clock().getTime() - 86_400_000).toISOString();
  render(
    ctx,
    opts.status ?? 200,
    ct(lang, 'endpoint_title', { url: e.url }),
    html`${notice('ok', opts.ok)} ${notice('error', opts.error)} ${opts.shown ?? null} ${endpointState(ctx, e)}
      <p class="mono">${e.id} · ${e.mode}${e.description ? html` · ${e.description}` : ''}</p>
      <div class="actions">
        <form method="post" action="${base}/events" class="stack">
          ${csrfField(csrf)} ${eventBoxes(ctx, e.events, `ev-${e.id}`)}
          <button type="submit" class="secondary">${ct(lang, 'save_event_types')}</button>
        </form>
        <form method="post" action="${base}/${e.status === 'enabled' ? 'disable' : 'enable'}">
          ${csrfField(csrf)}
          <button type="submit" class="${e.status === 'enabled' ? 'danger' : ''}">
            ${ct(lang, e.status === 'enabled' ? 'disable' : 'enable')}
          </button>
        </form>
        <form method="post" action="${base}/rotate">
          ${csrfField(csrf)}
          <button type="submit" class="secondary">${ct(lang, 'rotate_secret')}</button>
        </form>
        <form method="post" action="${base}/test" class="stack">
          ${csrfField(csrf)}
          <label
            >${ct(lang, 'event_type')}
            <select name="type">
              ${eventTypes.map((t) => html`<option value="${t}">${t}</option>`)}
            </select></label
          >
          <button type="submit" class="secondary">${ct(lang, 'send_test_event')}</button>
        </form>
        <form method="post" action="${base}/recover" class="stack">
          ${csrfField(csrf)}
          <input type="hidden" name="request_key" value="${requestKey()}" />
          <label
            >${ct(lang, 'recover_since')}
            <input type="text" name="since" required value="${dayAgo}" class="mono" />
          </label>
          <button type="submit">${ct(lang, 'recover_failed')}</button>
        </form>
      </div>
      <h2 id="deliveries">${ct(lang, 'deliveries')}</h2>
      ${deliveryFilter(ctx, base, state)}
      ${
        deliveries.length === 0
          ? html`<p>${ct(lang, 'no_deliveries')}</p>`
          : html`<div ${scrollRegion(ct(lang, 'deliveries'))}>
              <table>
                <thead>
                  <tr>
                    <th>${ct(lang, 'event')}</th>
                    <th>${ct(lang, 'attempt')}</th>
                    <th>${ct(lang, 'status')}</th>
                    <th>${ct(lang, 'response')}</th>
                    <th>${ct(lang, 'duration')}</th>
                    <th>${ct(lang, 'next_retry')}</th>
                    <th>${ct(lang, 'actions')}</th>
                  </tr>
                </thead>
                <tbody>
                  ${deliveries.map((d) => {
                    const state = deliveryState(d);
                    return html`<tr
                      class="delivery-${state}"
                      id="delivery-${d.event_id}-${d.generation}-${d.attempt_no}"
                    >
                      <td class="mono">${d.event_id}<br />${iso(d.delivered_at ?? d.created_at)}</td>
                      <td>${d.attempt_no}${d.generation > 0 ? html` (${ct(lang, 'resent')})` : ''}</td>
                      <td>
                        ${ct(lang, `dl_${state}` as ConsoleMessageKey)}<br /><span class="mono"
                          >${d.status_code ?? d.error ?? ''}</span
                        >
                      </td>
                      <td><pre class="response-body">${d.response_body ?? ''}</pre></td>
                      <td class="mono">${d.duration_ms === null ? '' : `${d.duration_ms} ms`}</td>
                      <td class="mono">${iso(d.next_retry_at) ?? ''}</td>
                      <td>
                        <form method="post" action="${base}/deliveries/${d.event_id}/resend">
                          ${csrfField(csrf)}
                          <button type="submit" class="secondary">${ct(lang, 'resend')}</button>
                        </form>
                      </td>
                    </tr>`;
                  })}
                </tbody>
              </table>
            </div>`
      }
      ${
        (older || queryOf(ctx, 'cursor')) &&
        html`<p class="tabs">
          ${queryOf(ctx, 'cursor') && html`<a href="${state ? `${base}?state=${state}` : base}">${ct(lang, 'dl_newest')}</a>`}
          ${older && html`<a href="${base}?${older.toString()}" id="older-deliveries">${ct(lang, 'dl_older')}</a>`}
        </p>`
      }
      <p><a href="${WEBHOOKS}">${ct(lang, 'back_to_webhooks')}</a></p>`,
    WEBHOOKS,
  );
}

/**
 * A service's refusal as a page: another merchant's or mode's object (404 from the service) is 403
 * and audited as denied, like the seller pages; a validation error is 422, a conflict 409.
 */
async function refusal(
  deps: ConsoleDeps,
  ctx: Context,
  err: unknown,
  action: string,
  target: string,
  page: (opts: PageOpts) => Promise<void>,
) {
  if (!(err instanceof ApiError)) throw err;
  if (err.status === 404) {
    await audit(deps.db, ctx, {
      user: stateOf(ctx).session!.user,
      action,
      target,
      outcome: 'denied',
      at: deps.clock(),
    });
    return forbidden(ctx);
  }
  if (err.status === 400 || err.status === 409 || err.status === 403)
    return page({ status: err.status === 409 ? 409 : 422, error: err.message });
  throw err;
}

const done = (deps: ConsoleDeps, ctx: Context, action: string, target: string, detail?: Record<string, unknown>) =>
  audit(deps.db, ctx, {
    user: stateOf(ctx).session!.user,
    action,
    target,
    outcome: 'success',
    detail: { mode: stateOf(ctx).mode, ...detail },
    at: deps.clock(),
  });

/** Creates an endpoint of the session's mode (the API's schema and service); its secret is shown once. */
export async function createEndpointAction(deps: ConsoleDeps, ctx: Context) {
  const { lang, mode } = stateOf(ctx);
  const description = (form(ctx).get('description') ?? '').trim();
  const parsed = endpointIn.safeParse({
    url: (form(ctx).get('url') ?? '').trim(),
    events: form(ctx).getAll('events'),
    mode,
    ...(description && { description }),
  });
  const page = (opts: PageOpts) => webhooksPage(deps, ctx, opts);
  if (!parsed.success) return page({ status: 422, error: parsed.error.issues[0].message });
  const key = form(ctx).get('request_key') || requestKey();
  try {
    const { endpoint, secret } = await createEndpoint(deps.webhooks, scopeOf(ctx), parsed.data, key.slice(0, 255));
    await done(deps, ctx, 'webhook_endpoint_create', endpoint.id, { url: endpoint.url, events: endpoint.events });
    return page({
      status: 201,
      ok: ct(lang, 'endpoint_created', { url: endpoint.url }),
      shown: secretShown(ctx, secret, null),
    });
  } catch (err) {
    return refusal(deps, ctx, err, 'webhook_endpoint_create', '', page);
  }
}

/** Edits the endpoint's event types, or disables or enables it (the API's PATCH service). */
export function patchEndpointAction(change: 'events' | 'disable' | 'enable') {
  return async (deps: ConsoleDeps, ctx: Context) => {
    const { lang } = stateOf(ctx);
    const id = String(ctx.params.endpointId);
    const action = `webhook_endpoint_${change}`;
    const page = (opts: PageOpts) => endpointPage(deps, ctx, opts);
    const parsed = endpointPatch.safeParse(
      change === 'events'
        ? { events: form(ctx).getAll('events') }
        : { status: change === 'disable' ? 'disabled' : 'enabled' },
    );
    if (!parsed.success) {
      // The endpoint must still be the merchant's before a 422 says anything about it.
      const mine = await deps
        .db('webhook_endpoints')
        .where({ id, ...scopeColumns(ctx) })
        .first('id');
      if (!mine) return refusal(deps, ctx, ApiError.notFound('endpoint_not_found'), action, id, page);
      return page({ status: 422, error: parsed.error.issues[0].message });
    }
    try {
      const row = await updateEndpoint(deps.webhooks, scopeOf(ctx), id, parsed.data);
      await done(deps, ctx, action, id, change === 'events' ? { events: row.events } : undefined);
    } catch (err) {
      return refusal(deps, ctx, err, action, id, page);
    }
    return page({ ok: ct(lang, `endpoint_${change}_done` as ConsoleMessageKey) });
  };
}

const scopeColumns = (ctx: Context) => ({ merchant_id: scopeOf(ctx).merchantId, mode: scopeOf(ctx).mode });

/** Rotates the signing secret (re-authenticated): the new one shown once, and when the old one stops. */
export async function rotateSecretAction(deps: ConsoleDeps, ctx: Context) {
  const { lang } = stateOf(ctx);
  const id = String(ctx.params.endpointId);
  const page = (opts: PageOpts) => endpointPage(deps, ctx, opts);
  try {
    const { endpoint, secret } = await rotateSecret(deps.webhooks, scopeOf(ctx), id);
    await done(deps, ctx, 'webhook_secret_rotate', id, {
      previous_secret_expires_at: iso(endpoint.previous_secret_expires_at),
    });
    return page({
      ok: ct(lang, 'secret_rotated'),
      shown: secretShown(ctx, secret, endpoint.previous_secret_expires_at),
    });
  } catch (err) {
    return refusal(deps, ctx, err, 'webhook_secret_rotate', id, page);
  }
}

/** Sends a test event of the chosen type to this endpoint alone. */
export async function testEventAction(deps: ConsoleDeps, ctx: Context) {
  const { lang } = stateOf(ctx);
  const id = String(ctx.params.endpointId);
  const page = (opts: PageOpts) => endpointPage(deps, ctx, opts);
  const type = form(ctx).get('type') ?? '';
  if (!(eventTypes as readonly string[]).includes(type)) {
    const mine = await deps
      .db('webhook_endpoints')
      .where({ id, ...scopeColumns(ctx) })
      .first('id');
    if (!mine) return refusal(deps, ctx, ApiError.notFound('endpoint_not_found'), 'webhook_test_event', id, page);
    return page({ status: 422, error: ct(lang, 'choose_event_type') });
  }
  try {
    const { eventId } = await sendTestEvent(deps.webhooks, scopeOf(ctx), id, type as EventType);
    await done(deps, ctx, 'webhook_test_event', id, { type, event_id: eventId });
    return page({ status: 202, ok: ct(lang, 'test_event_sent', { event: eventId }) });
  } catch (err) {
    return refusal(deps, ctx, err, 'webhook_test_event', id, page);
  }
}

/**
 * Resends one event (the API's redeliver service: a new generation to the merchant's enabled
 * endpoints subscribed to it), after checking the endpoint is the merchant's in this mode.
 */
export async function resendAction(deps: ConsoleDeps, ctx: Context) {
  const { lang } = stateOf(ctx);
  const id = String(ctx.params.endpointId);
  const eventId = String(ctx.params.eventId);
  const page = (opts: PageOpts) => endpointPage(deps, ctx, opts);
  try {
    await getEndpoint(deps.webhooks, scopeOf(ctx), id);
    const endpoints = await redeliverEvent(deps.webhooks, scopeOf(ctx), eventId);
    await done(deps, ctx, 'webhook_resend', eventId, { endpoint_id: id, endpoints });
    return page({
      status: 202,
      ok: ct(lang, endpoints === 0 ? 'resend_none' : 'resent_event', { event: eventId, count: endpoints }),
    });
  } catch (err) {
    return refusal(deps, ctx, err, 'webhook_resend', eventId, page);
  }
}

/**
 * Recover: every event since `since` (up to now) that this endpoint has not had delivered, queued
 * again as one new generation by the API's replay service (the whole filter, not the page shown).
 */
export async function recoverAction(deps: ConsoleDeps, ctx: Context) {
  const { lang } = stateOf(ctx);
  const id = String(ctx.params.endpointId);
  const page = (opts: PageOpts) => endpointPage(deps, ctx, opts);
  const since = (form(ctx).get('since') ?? '').trim();
  const parsed = replayIn.safeParse({ since, until: deps.clock().toISOString() });
  try {
    if (!parsed.success) {
      await getEndpoint(deps.webhooks, scopeOf(ctx), id);
      return page({ status: 422, error: ct(lang, 'since_invalid') });
    }
    const key = (form(ctx).get('request_key') || requestKey()).slice(0, 255);
    const row = await replayWindow(deps.webhooks, scopeOf(ctx), id, key, parsed.data, { undeliveredOnly: true });
    await done(deps, ctx, 'webhook_recover', id, { since: iso(row.since), queued: row.queued, replay: row.id });
    return page({ status: 202, ok: ct(lang, 'recover_queued', { count: row.queued, since: iso(row.since) }) });
  } catch (err) {
    return refusal(deps, ctx, err, 'webhook_recover', id, page);
  }
}
