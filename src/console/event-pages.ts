/** Developers › Events: the merchant's 30-day event log of the session's mode, through `GET /v1/events`'s query. */
import type { Context } from 'koa';
import { checkoutCursor, listOut } from '../checkout/cursor';
import { eventOut, eventTypes, listEvents } from '../checkout/events';
import { html } from '../hosted/html';
import { ApiError } from '../http/errors';
import { ConsoleDeps, render, stateOf } from './context';
import { notice } from './layout';
import { ct } from './messages';
import { scopeOf } from './webhook-pages';

export const EVENTS = '/console/developers/events';
/** Events per page. */
export const EVENTS_PER_PAGE = 50;

const queryOf = (ctx: Context, name: string) => (typeof ctx.query[name] === 'string' ? ctx.query[name] : '');

/** The events, newest first, of one type or all, optionally only those an endpoint still waits for; each with its payload. */
export async function eventsPage(deps: ConsoleDeps, ctx: Context) {
  const { lang } = stateOf(ctx);
  const asked = queryOf(ctx, 'type');
  const type = (eventTypes as readonly string[]).includes(asked) ? asked : undefined;
  const failed = queryOf(ctx, 'failed') === '1';
  let list: { data: Array<ReturnType<typeof eventOut>>; next_cursor: string | null };
  try {
    const page = await listEvents(deps.db, scopeOf(ctx), {
      type,
      deliverySuccess: failed ? false : undefined,
      after: checkoutCursor('events', queryOf(ctx, 'cursor') || undefined),
      limit: EVENTS_PER_PAGE,
    });
    list = { data: page.rows.map(eventOut), next_cursor: listOut('events', page, eventOut).next_cursor };
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 400) throw err;
    return render(ctx, 422, ct(lang, 'events_title'), html`${notice('error', ct(lang, 'bad_cursor'))}`, EVENTS);
  }
  const next = new URLSearchParams({
    ...(type && { type }),
    ...(failed && { failed: '1' }),
    ...(list.next_cursor && { cursor: list.next_cursor }),
  });
  render(
    ctx,
    200,
    ct(lang, 'events_title'),
    html`<form method="get" action="${EVENTS}" class="stack">
        <label
          >${ct(lang, 'event_type')}
          <select name="type">
            <option value="">${ct(lang, 'all_events')}</option>
            ${eventTypes.map((t) => html`<option value="${t}" ${t === type ? html`selected` : ''}>${t}</option>`)}
          </select></label
        >
        <label
          ><input type="checkbox" name="failed" value="1" ${failed ? html`checked` : ''} />
          ${ct(lang, 'only_undelivered')}</label
        >
        <button type="submit" class="secondary">${ct(lang, 'filter')}</button>
      </form>
      ${
        list.data.length === 0
          ? html`<p>${ct(lang, 'no_events')}</p>`
          : html`<ul class="events">
              ${list.data.map(
                (e) =>
                  html`<li id="event-${e.id}">
                    <span class="mono">${e.created_at}</span> <strong class="mono">${e.type}</strong>
                    <span class="mono">${e.id}</span>
                    <details>
                      <summary>${ct(lang, 'payload')}</summary>
                      <pre class="payload">${JSON.stringify(e, null, 2)}</pre>
                    </details>
                  </li>`,
              )}
            </ul>`
      }
      ${list.next_cursor && html`<p><a href="${EVENTS}?${next.toString()}">${ct(lang, 'next_page')}</a></p>`}`,
    EVENTS,
  );
}
