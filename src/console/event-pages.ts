/** Developers › Events: the merchant's 30-day event log of the session's mode, through `GET /v1/events`' queries. */
import type { Context } from 'koa';
import { checkoutCursor, listOut } from '../checkout/cursor';
import { eventOut, eventTypes, getEvent, listEvents } from '../checkout/events';
import { html } from '../hosted/html';
import { ApiError } from '../http/errors';
import { ConsoleDeps, render, stateOf } from './context';
import { dayAfter, dayOf } from './days';
import { notice } from './layout';
import { ct } from './messages';
import { scopeOf } from './webhook-pages';

export const EVENTS = '/console/developers/events';
/** Events per page. */
export const EVENTS_PER_PAGE = 50;

const queryOf = (ctx: Context, name: string) => (typeof ctx.query[name] === 'string' ? ctx.query[name].trim() : '');

/**
 * The events, newest first, of one type or all, created within a range of UTC days (`from`, `to`,
 * both inclusive), optionally only those an endpoint still waits for; or the one with id `q` (the
 * API's single read: of this merchant and mode, within the 30 days). Each with its payload.
 */
export async function eventsPage(deps: ConsoleDeps, ctx: Context) {
  const { lang } = stateOf(ctx);
  const asked = queryOf(ctx, 'type');
  const type = (eventTypes as readonly string[]).includes(asked) ? asked : undefined;
  const failed = queryOf(ctx, 'failed') === '1';
  const search = queryOf(ctx, 'q').slice(0, 100);
  const fromText = queryOf(ctx, 'from');
  const toText = queryOf(ctx, 'to');
  const from = dayOf(fromText);
  const to = dayOf(toText);
  const form = html`<form method="get" action="${EVENTS}" class="stack" role="search">
    <label
      >${ct(lang, 'search_event_id')}
      <input type="search" name="q" value="${search}" maxlength="100" autocomplete="off" class="mono"
    /></label>
    <label
      >${ct(lang, 'event_type')}
      <select name="type">
        <option value="">${ct(lang, 'all_events')}</option>
        ${eventTypes.map((t) => html`<option value="${t}" ${t === type ? html`selected` : ''}>${t}</option>`)}
      </select></label
    >
    <label>${ct(lang, 'created_from')} <input type="date" name="from" value="${fromText}" /></label>
    <label>${ct(lang, 'created_to')} <input type="date" name="to" value="${toText}" /></label>
    <label
      ><input type="checkbox" name="failed" value="1" ${failed ? html`checked` : ''} />
      ${ct(lang, 'only_undelivered')}</label
    >
    <button type="submit" class="secondary">${ct(lang, 'filter')}</button>
  </form>`;
  const refused = (text: string) =>
    render(ctx, 422, ct(lang, 'events_title'), html`${notice('error', text)} ${form}`, EVENTS);
  if (from === null || to === null) return refused(ct(lang, 'bad_date'));

  let list: { data: Array<ReturnType<typeof eventOut>>; next_cursor: string | null };
  if (search) {
    // The API's single read: another merchant's or mode's id, or one past the 30 days, is none.
    const one = await getEvent(deps.db, scopeOf(ctx), search);
    list = { data: one ? [eventOut(one)] : [], next_cursor: null };
  } else {
    try {
      const page = await listEvents(deps.db, scopeOf(ctx), {
        type,
        since: from,
        until: to && dayAfter(to),
        deliverySuccess: failed ? false : undefined,
        after: checkoutCursor('events', queryOf(ctx, 'cursor') || undefined),
        limit: EVENTS_PER_PAGE,
      });
      list = { data: page.rows.map(eventOut), next_cursor: listOut('events', page, eventOut).next_cursor };
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 400) throw err;
      return refused(ct(lang, 'bad_cursor'));
    }
  }
  const next = new URLSearchParams({
    ...(type && { type }),
    ...(fromText && { from: fromText }),
    ...(toText && { to: toText }),
    ...(failed && { failed: '1' }),
    ...(list.next_cursor && { cursor: list.next_cursor }),
  });
  render(
    ctx,
    200,
    ct(lang, 'events_title'),
    html`${form}
    ${
      list.data.length === 0
        ? html`<p>${ct(lang, search ? 'no_event_with_id' : 'no_events')}</p>`
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
