import type { Context } from 'koa';
import { html } from '../hosted/html';
import { iso } from '../lib/time';
import { audit, auditPage } from './audit';
import { ConsoleDeps, forbidden, render, stateOf } from './context';
import { csrfField, scrollRegion } from './layout';
import { ct } from './messages';
import { liveSessions, revokeSession } from './sessions';

export async function sessionsPage(deps: ConsoleDeps, ctx: Context) {
  const { lang, csrf, session } = stateOf(ctx);
  const rows = await liveSessions(deps.db, session!.user.id, deps.clock());
  render(
    ctx,
    200,
    ct(lang, 'sessions_title'),
    html`<div ${scrollRegion(ct(lang, 'sessions_title'))}>
      <table>
        <thead>
          <tr>
            <th>${ct(lang, 'created')}</th>
            <th>${ct(lang, 'last_seen')}</th>
            <th>${ct(lang, 'ip')}</th>
            <th>${ct(lang, 'device')}</th>
            <th>${ct(lang, 'actions')}</th>
          </tr>
        </thead>
        <tbody>
          ${rows.map(
            (r) =>
              html`<tr>
                <td class="mono">${iso(r.created_at)}</td>
                <td class="mono">${iso(r.last_seen_at)}</td>
                <td class="mono">${r.ip}</td>
                <td>${r.user_agent}</td>
                <td>
                  ${
                    r.id === session!.id
                      ? ct(lang, 'this_session')
                      : html`<form method="post" action="/console/account/sessions/${r.id}/revoke">
                          ${csrfField(csrf)} <button type="submit" class="secondary">${ct(lang, 'revoke')}</button>
                        </form>`
                  }
                </td>
              </tr>`,
          )}
        </tbody>
      </table>
    </div>`,
    '/console/account/sessions',
  );
}

export async function revokeOwnSession(deps: ConsoleDeps, ctx: Context) {
  const { session } = stateOf(ctx);
  const id = String(ctx.params.sessionId);
  const revoked = await revokeSession(deps.db, session!.user.id, id, deps.clock());
  await audit(deps.db, ctx, {
    user: session!.user,
    action: 'session_revoke',
    target: id,
    outcome: revoked ? 'success' : 'denied',
    at: deps.clock(),
  });
  if (!revoked) return forbidden(ctx);
  ctx.status = 303;
  ctx.redirect('/console/account/sessions');
}

export async function auditLogPage(deps: ConsoleDeps, ctx: Context) {
  const { lang, session } = stateOf(ctx);
  const rows = await auditPage(deps.db, session!.user);
  render(
    ctx,
    200,
    ct(lang, 'audit_title'),
    html`<div ${scrollRegion(ct(lang, 'audit_title'))}>
      <table>
        <thead>
          <tr>
            <th>${ct(lang, 'when')}</th>
            <th>${ct(lang, 'who')}</th>
            <th>${ct(lang, 'what')}</th>
            <th>${ct(lang, 'target')}</th>
            <th>${ct(lang, 'outcome')}</th>
            <th>${ct(lang, 'ip')}</th>
          </tr>
        </thead>
        <tbody>
          ${rows.map(
            (r) =>
              html`<tr>
                <td class="mono">${iso(r.at)}</td>
                <td>${r.actor_email}</td>
                <td class="mono">${r.action}</td>
                <td class="mono">${r.target}</td>
                <td>${r.outcome}</td>
                <td class="mono">${r.ip}</td>
              </tr>`,
          )}
        </tbody>
      </table>
    </div>`,
    '/console/audit',
  );
}
