import type { Context } from 'koa';
import { html } from '../hosted/html';
import { OpsError } from '../ops/errors';
import { createInvite } from './accounts';
import { audit } from './audit';
import { ConsoleDeps, forbidden, render, stateOf } from './context';
import { csrfField, notice, scrollRegion } from './layout';
import { ct } from './messages';
import { consoleRoles, isConsoleRole } from './roles';

const USERS = '/console/settings/users';
const tenantOf = (ctx: Context) => {
  const { seller_id, merchant_id } = stateOf(ctx).session!.user;
  return { seller_id, merchant_id };
};
const tenantWhere = (t: { seller_id: string | null; merchant_id: string | null }): Record<string, string> =>
  t.seller_id ? { seller_id: t.seller_id } : { merchant_id: t.merchant_id! };

function roleSelect(ctx: Context, current: string, id: string) {
  const { lang } = stateOf(ctx);
  return html`<label
    >${ct(lang, 'role')}
    <select name="role" id="${id}">
      ${consoleRoles.map((r) => html`<option value="${r}" ${r === current ? html`selected` : ''}>${r}</option>`)}
    </select></label
  >`;
}

/** Settings › Users (owners): the tenant's users with their roles, and the invite form. */
export async function usersPage(
  deps: ConsoleDeps,
  ctx: Context,
  opts: {
    status?: number;
    ok?: string | null;
    error?: string | null;
    link?: { email: string; url: string } | null;
  } = {},
) {
  const { lang, csrf, session } = stateOf(ctx);
  const users = await deps
    .db('console_users')
    .where(tenantWhere(tenantOf(ctx)))
    .whereNull('disabled_at')
    .orderBy('created_at')
    .select('id', 'email', 'role');
  render(
    ctx,
    opts.status ?? 200,
    ct(lang, 'users_title'),
    html`${notice('ok', opts.ok)} ${notice('error', opts.error)}
      ${
        opts.link &&
        html`<section aria-labelledby="invite-link">
          <h2 id="invite-link">${ct(lang, 'invite_link_title')}</h2>
          <p>${ct(lang, 'invite_link_help', { email: opts.link.email })}</p>
          <p class="secret" id="invite-link-value">${opts.link.url}</p>
        </section>`
      }
      <div ${scrollRegion(ct(lang, 'users_title'))}>
        <table>
          <thead>
            <tr>
              <th>${ct(lang, 'email')}</th>
              <th>${ct(lang, 'role')}</th>
            </tr>
          </thead>
          <tbody>
            ${users.map(
              (u) =>
                html`<tr>
                  <td>${u.email}</td>
                  <td>
                    ${
                      u.id === session!.user.id
                        ? u.role
                        : html`<form method="post" action="${USERS}/${u.id}/role" class="stack">
                            ${csrfField(csrf)} ${roleSelect(ctx, u.role, `role-${u.id}`)}
                            <button type="submit" class="secondary">${ct(lang, 'change_role')}</button>
                          </form>`
                    }
                  </td>
                </tr>`,
            )}
          </tbody>
        </table>
      </div>
      <h2>${ct(lang, 'invite_user')}</h2>
      <form method="post" action="${USERS}/invite" class="stack">
        ${csrfField(csrf)}
        <label>${ct(lang, 'email')} <input type="email" name="email" required /></label>
        ${roleSelect(ctx, 'viewer', 'invite-role')}
        <button type="submit">${ct(lang, 'invite_user')}</button>
      </form>`,
    USERS,
  );
}

/** An invite to the owner's own tenant; the one-time link is shown on the page, once. */
export async function inviteUser(deps: ConsoleDeps, ctx: Context) {
  const { lang, session, form } = stateOf(ctx);
  const email = (form.get('email') ?? '').trim();
  const role = form.get('role') ?? '';
  if (!isConsoleRole(role)) return usersPage(deps, ctx, { status: 422, error: ct(lang, 'email_invalid') });
  const t = tenantOf(ctx);
  const tenant = t.seller_id ? { sellerId: t.seller_id } : { merchantId: t.merchant_id! };
  try {
    const invite = await createInvite(deps.db, {
      ...tenant,
      email,
      role,
      invitedBy: session!.user.id,
      now: deps.clock(),
    });
    await audit(deps.db, ctx, {
      user: session!.user,
      action: 'user_invite',
      target: invite.invite_id,
      outcome: 'success',
      detail: { email, role },
      at: deps.clock(),
    });
    const url = `${deps.origin}/console/invite/${invite.token}`;
    return usersPage(deps, ctx, { status: 201, link: { email, url } });
  } catch (err) {
    if (err instanceof OpsError && (err.code === 'email_taken' || err.code === 'invalid_email'))
      return usersPage(deps, ctx, {
        status: 422,
        error: ct(lang, err.code === 'email_taken' ? 'email_taken' : 'email_invalid'),
      });
    throw err;
  }
}

/**
 * Changes another user's role in the owner's tenant (re-authenticated). One's own role is not
 * changed here, and the last owner is never demoted.
 */
export async function changeRole(deps: ConsoleDeps, ctx: Context) {
  const { lang, session, form } = stateOf(ctx);
  const userId = String(ctx.params.userId);
  const role = form.get('role') ?? '';
  const tenant = tenantWhere(tenantOf(ctx));
  const refuse = async () => {
    await audit(deps.db, ctx, {
      user: session!.user,
      action: 'role_change',
      target: userId,
      outcome: 'denied',
      at: deps.clock(),
    });
    forbidden(ctx);
  };
  if (!isConsoleRole(role)) return refuse();
  if (userId === session!.user.id) return usersPage(deps, ctx, { status: 409, error: ct(lang, 'own_role') });
  const outcome = await deps.db.transaction(async (trx) => {
    // Every user of the tenant locked in id order (a tenant has a handful): two owners demoting
    // each other at once wait for one another instead of both succeeding (or deadlocking).
    const members: Array<{ id: string; email: string; role: string }> = await trx('console_users')
      .where(tenant)
      .whereNull('disabled_at')
      .orderBy('id')
      .forUpdate()
      .select('id', 'email', 'role');
    const target = members.find((m) => m.id === userId);
    const actor = members.find((m) => m.id === session!.user.id);
    if (!target || actor?.role !== 'owner') return 'not_found' as const;
    const owners = members.filter((m) => m.role === 'owner' && m.id !== userId).length;
    if (target.role === 'owner' && role !== 'owner' && owners === 0) return 'last_owner' as const;
    await trx('console_users').where({ id: userId }).update({ role });
    // A new role takes effect on the next request: sessions read the role from the user's row.
    return { email: target.email, from: target.role };
  });
  if (outcome === 'not_found') return refuse();
  if (outcome === 'last_owner') return usersPage(deps, ctx, { status: 409, error: ct(lang, 'last_owner') });
  await audit(deps.db, ctx, {
    user: session!.user,
    action: 'role_change',
    target: userId,
    outcome: 'success',
    detail: { from: outcome.from, to: role },
    at: deps.clock(),
  });
  await usersPage(deps, ctx, { ok: ct(lang, 'role_changed', { email: outcome.email, role }) });
}
