import type { Context } from 'koa';
import type { Db } from '../db/knex';
import { html } from '../hosted/html';
import { iso } from '../lib/time';
import { OpsError } from '../ops/errors';
import { createInvite } from './accounts';
import { audit } from './audit';
import { ConsoleDeps, forbidden, render, stateOf } from './context';
import { csrfField, notice, scrollRegion } from './layout';
import { ct } from './messages';
import { consoleRoles, isConsoleRole } from './roles';

const USERS = '/console/settings/users';

interface Member {
  id: string;
  email: string;
  role: string;
  disabled_at: Date | null;
}

/**
 * Every user of the tenant, disabled ones too, locked in id order (a tenant has a handful): two
 * owners demoting or disabling each other at once wait for one another instead of both succeeding
 * (or deadlocking).
 */
const lockMembers = (trx: Db, tenant: Record<string, string>): Promise<Member[]> =>
  trx('console_users').where(tenant).orderBy('id').forUpdate().select('id', 'email', 'role', 'disabled_at');

const tenantOf = (ctx: Context) => {
  const { seller_id, merchant_id } = stateOf(ctx).session!.user;
  return { seller_id, merchant_id };
};
const tenantWhere = (t: { seller_id: string | null; merchant_id: string | null }): Record<string, string> =>
  t.seller_id ? { seller_id: t.seller_id } : { merchant_id: t.merchant_id! };

/**
 * The signed-in user's tenant's members, locked for a change to `userId` made by that user, and
 * `userId`'s row; null when `userId` is not of the tenant or the actor is no longer an enabled owner.
 */
async function lockForOwner(
  trx: Db,
  ctx: Context,
  userId: string,
): Promise<{ members: Member[]; target: Member } | null> {
  const members = await lockMembers(trx, tenantWhere(tenantOf(ctx)));
  const target = members.find((m) => m.id === userId);
  const actor = members.find((m) => m.id === stateOf(ctx).session!.user.id);
  return target && actor?.role === 'owner' && !actor.disabled_at ? { members, target } : null;
}

function roleSelect(ctx: Context, current: string, id: string) {
  const { lang } = stateOf(ctx);
  return html`<label
    >${ct(lang, 'role')}
    <select name="role" id="${id}">
      ${consoleRoles.map((r) => html`<option value="${r}" ${r === current ? html`selected` : ''}>${r}</option>`)}
    </select></label
  >`;
}

/** A one-button form posting to `action` (the button's label names its object for screen readers). */
function actionButton(ctx: Context, action: string, label: string, object: string, tone: 'secondary' | 'danger') {
  return html`<form method="post" action="${action}">
    ${csrfField(stateOf(ctx).csrf)}
    <button type="submit" class="${tone}" aria-label="${label} ${object}">${label}</button>
  </form>`;
}

/** The tenant's invites not yet used, revoked or expired, oldest first. */
const pendingInvites = (deps: ConsoleDeps, ctx: Context) =>
  deps
    .db('console_invites')
    .where(tenantWhere(tenantOf(ctx)))
    .whereNull('used_at')
    .whereNull('revoked_at')
    .where('expires_at', '>', deps.clock())
    .orderBy('created_at')
    .select('id', 'email', 'role', 'expires_at') as Promise<
    Array<{ id: string; email: string; role: string; expires_at: Date }>
  >;

/**
 * Settings › Users (owners): the tenant's users with their roles and state (change a role,
 * disable, enable), the pending invites (revoke), and the invite form.
 */
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
  const users: Array<{ id: string; email: string; role: string; disabled_at: Date | null }> = await deps
    .db('console_users')
    .where(tenantWhere(tenantOf(ctx)))
    .orderBy('created_at')
    .select('id', 'email', 'role', 'disabled_at');
  const invites = await pendingInvites(deps, ctx);
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
            ${users.map((u) => {
              const self = u.id === session!.user.id;
              // The state and its action under the e-mail: two columns fit a phone's width.
              return html`<tr id="user-${u.id}">
                <td>
                  ${u.email}
                  <p>${ct(lang, u.disabled_at ? 'user_disabled' : 'user_active')}</p>
                  ${
                    self
                      ? ''
                      : u.disabled_at
                        ? actionButton(ctx, `${USERS}/${u.id}/enable`, ct(lang, 'enable'), u.email, 'secondary')
                        : actionButton(ctx, `${USERS}/${u.id}/disable`, ct(lang, 'disable'), u.email, 'danger')
                  }
                </td>
                <td>
                  ${
                    self || u.disabled_at
                      ? u.role
                      : html`<form method="post" action="${USERS}/${u.id}/role" class="stack">
                          ${csrfField(csrf)} ${roleSelect(ctx, u.role, `role-${u.id}`)}
                          <button type="submit" class="secondary">${ct(lang, 'change_role')}</button>
                        </form>`
                  }
                </td>
              </tr>`;
            })}
          </tbody>
        </table>
      </div>
      <h2 id="pending-invites">${ct(lang, 'pending_invites')}</h2>
      ${
        invites.length === 0
          ? html`<p>${ct(lang, 'no_pending_invites')}</p>`
          : html`<div class="table-wrap">
              <table aria-labelledby="pending-invites">
                <thead>
                  <tr>
                    <th>${ct(lang, 'email')}</th>
                    <th>${ct(lang, 'role')}</th>
                  </tr>
                </thead>
                <tbody>
                  ${invites.map(
                    (i) =>
                      html`<tr id="invite-${i.id}">
                        <td>
                          ${i.email}
                          <p>${ct(lang, 'expires_at', { at: iso(i.expires_at) })}</p>
                          ${actionButton(ctx, `${USERS}/invites/${i.id}/revoke`, ct(lang, 'revoke'), i.email, 'secondary')}
                        </td>
                        <td>${i.role}</td>
                      </tr>`,
                  )}
                </tbody>
              </table>
            </div>`
      }
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
    const locked = await lockForOwner(trx, ctx, userId);
    if (!locked || locked.target.disabled_at) return 'not_found' as const;
    const { members, target } = locked;
    const owners = members.filter((m) => m.role === 'owner' && !m.disabled_at && m.id !== userId).length;
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

/** An owner's refusal of another tenant's (or an unknown) user or invite: audited as denied, 403. */
async function refused(deps: ConsoleDeps, ctx: Context, action: string, target: string) {
  await audit(deps.db, ctx, {
    user: stateOf(ctx).session!.user,
    action,
    target: target.slice(0, 64),
    outcome: 'denied',
    at: deps.clock(),
  });
  forbidden(ctx);
}

/**
 * Disables another user of the owner's tenant (re-authenticated): they cannot sign in, and every
 * session of theirs ends in the same transaction (sessions also end with the user's state: see
 * `sessionOf`). One's own account is not disabled here (409), so the owner acting stays: the last
 * owner is never disabled, and under the tenant's lock two owners disabling each other at once
 * cannot both succeed (the second finds itself disabled: 403).
 */
export async function disableUser(deps: ConsoleDeps, ctx: Context) {
  const { lang, session } = stateOf(ctx);
  const userId = String(ctx.params.userId);
  if (userId === session!.user.id) return usersPage(deps, ctx, { status: 409, error: ct(lang, 'own_disable') });
  const now = deps.clock();
  const outcome = await deps.db.transaction(async (trx) => {
    const target = (await lockForOwner(trx, ctx, userId))?.target;
    if (!target) return 'not_found' as const;
    if (target.disabled_at) return { email: target.email, sessions: 0 };
    await trx('console_users').where({ id: userId }).update({ disabled_at: now });
    const ended = await trx('console_sessions')
      .where({ user_id: userId })
      .whereNull('revoked_at')
      .update({ revoked_at: now })
      .returning('id');
    return { email: target.email, sessions: ended.length };
  });
  if (outcome === 'not_found') return refused(deps, ctx, 'user_disable', userId);
  await audit(deps.db, ctx, {
    user: session!.user,
    action: 'user_disable',
    target: userId,
    outcome: 'success',
    detail: { email: outcome.email, sessions_ended: outcome.sessions },
    at: now,
  });
  await usersPage(deps, ctx, { ok: ct(lang, 'user_disabled_done', { email: outcome.email }) });
}

/** Enables a disabled user of the owner's tenant again (re-authenticated): they sign in anew (their old sessions stay ended). */
export async function enableUser(deps: ConsoleDeps, ctx: Context) {
  const { lang, session } = stateOf(ctx);
  const userId = String(ctx.params.userId);
  const now = deps.clock();
  const outcome = await deps.db.transaction(async (trx) => {
    const target = (await lockForOwner(trx, ctx, userId))?.target;
    if (!target) return 'not_found' as const;
    if (target.disabled_at) await trx('console_users').where({ id: userId }).update({ disabled_at: null });
    return { email: target.email };
  });
  if (outcome === 'not_found') return refused(deps, ctx, 'user_enable', userId);
  await audit(deps.db, ctx, {
    user: session!.user,
    action: 'user_enable',
    target: userId,
    outcome: 'success',
    detail: { email: outcome.email },
    at: now,
  });
  await usersPage(deps, ctx, { ok: ct(lang, 'user_enabled_done', { email: outcome.email }) });
}

/** Revokes a pending invite of the owner's tenant (re-authenticated): its link stops working. A used or expired one: 409. */
export async function revokeInvite(deps: ConsoleDeps, ctx: Context) {
  const { lang, session } = stateOf(ctx);
  const inviteId = String(ctx.params.inviteId);
  const now = deps.clock();
  const invite = await deps
    .db('console_invites')
    .where({ id: inviteId, ...tenantWhere(tenantOf(ctx)) })
    .first('id', 'email', 'role');
  if (!invite) return refused(deps, ctx, 'invite_revoke', inviteId);
  const revoked = await deps
    .db('console_invites')
    .where({ id: inviteId })
    .whereNull('used_at')
    .whereNull('revoked_at')
    .where('expires_at', '>', now)
    .update({ revoked_at: now })
    .returning('id');
  if (revoked.length === 0) return usersPage(deps, ctx, { status: 409, error: ct(lang, 'invite_not_pending') });
  await audit(deps.db, ctx, {
    user: session!.user,
    action: 'invite_revoke',
    target: inviteId,
    outcome: 'success',
    detail: { email: invite.email, role: invite.role },
    at: now,
  });
  await usersPage(deps, ctx, { ok: ct(lang, 'invite_revoked', { email: invite.email }) });
}
