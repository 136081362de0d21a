import type { Context } from 'koa';
import { html } from '../hosted/html';
import { iso } from '../lib/time';
import { audit } from './audit';
import { ConsoleDeps, forbidden, render, stateOf } from './context';
import { csrfField, notice, scrollRegion } from './layout';
import { ct } from './messages';
import { passkeysOf, registerPasskey, registrationOptions, relyingParty, removePasskey } from './passkeys';

export const SECURITY_PATH = '/console/account/security';

/** Account › Security: one's passkeys (name, created, last used, remove) and the form that adds one. */
export async function securityPage(
  deps: ConsoleDeps,
  ctx: Context,
  status = 200,
  flash: { tone: 'ok' | 'error'; text: string } | null = null,
) {
  const { lang, csrf, session } = stateOf(ctx);
  const rows = await passkeysOf(deps.db, session!.user.id);
  render(
    ctx,
    status,
    ct(lang, 'security_title'),
    html`${flash && notice(flash.tone, flash.text)}
      <h2>${ct(lang, 'passkeys')}</h2>
      <p>${ct(lang, 'passkeys_help')}</p>
      ${
        rows.length === 0
          ? html`<p id="no-passkeys">${ct(lang, 'no_passkeys')}</p>`
          : html`<div ${scrollRegion(ct(lang, 'passkeys'))}>
              <table id="passkeys">
                <thead>
                  <tr>
                    <th>${ct(lang, 'passkey_col_name')}</th>
                    <th>${ct(lang, 'created')}</th>
                    <th>${ct(lang, 'last_used')}</th>
                    <th>${ct(lang, 'actions')}</th>
                  </tr>
                </thead>
                <tbody>
                  ${rows.map(
                    (r) =>
                      html`<tr>
                        <td>${r.name}</td>
                        <td class="mono">${iso(r.created_at)}</td>
                        <td class="mono">${r.last_used_at ? iso(r.last_used_at) : ct(lang, 'never_used')}</td>
                        <td>
                          <form method="post" action="/console/account/passkeys/${r.id}/remove">
                            ${csrfField(csrf)}
                            <button type="submit" class="secondary" aria-label="${ct(lang, 'remove')} ${r.name}">
                              ${ct(lang, 'remove')}
                            </button>
                          </form>
                        </td>
                      </tr>`,
                  )}
                </tbody>
              </table>
            </div>`
      }
      <section data-passkey-section hidden>
        <form
          method="post"
          action="/console/account/passkeys"
          class="stack"
          data-passkey="register"
          data-options="/console/account/passkeys/options"
          data-failed="${ct(lang, 'passkey_failed')}"
        >
          ${csrfField(csrf)}
          <input type="hidden" name="response" value="" />
          <label
            >${ct(lang, 'passkey_name')}
            <input type="text" name="name" maxlength="60" value="${ct(lang, 'passkey_default_name')}" required
          /></label>
          <p class="notice notice-error" role="alert" data-passkey-status hidden></p>
          <button type="submit">${ct(lang, 'add_passkey')}</button>
        </form>
      </section>
      <noscript><p>${ct(lang, 'passkey_script_needed')}</p></noscript>`,
    SECURITY_PATH,
    ['simplewebauthn-browser.js', 'console-passkeys.js'],
  );
}

/** The options for a new passkey (JSON), its challenge kept for this session. */
export async function registrationOptionsRoute(deps: ConsoleDeps, ctx: Context) {
  const { session } = stateOf(ctx);
  const options = await registrationOptions(
    deps.db,
    relyingParty(deps.origin),
    session!.user,
    session!.id,
    deps.clock(),
  );
  ctx.status = 200;
  ctx.body = options;
}

/** Verifies the browser's registration answer and stores the passkey. */
export async function addPasskey(deps: ConsoleDeps, ctx: Context) {
  const { lang, session, form } = stateOf(ctx);
  const now = deps.clock();
  const result = await registerPasskey(deps.db, relyingParty(deps.origin), {
    user: session!.user,
    sessionId: session!.id,
    name: form.get('name') ?? '',
    response: form.get('response') ?? '',
    now,
  });
  await audit(deps.db, ctx, {
    user: session!.user,
    action: 'passkey_add',
    target: result.ok ? result.id : null,
    outcome: result.ok ? 'success' : 'failed',
    detail: result.ok ? undefined : { reason: result.reason },
    at: now,
  });
  if (!result.ok) {
    const text = ct(
      lang,
      result.reason === 'duplicate'
        ? 'passkey_duplicate'
        : result.reason === 'too_many'
          ? 'passkey_too_many'
          : 'passkey_failed',
    );
    return securityPage(deps, ctx, result.reason === 'duplicate' || result.reason === 'too_many' ? 409 : 422, {
      tone: 'error',
      text,
    });
  }
  return securityPage(deps, ctx, 201, { tone: 'ok', text: ct(lang, 'passkey_added') });
}

/** Removes one of one's own passkeys; another's (or none) is 403. */
export async function deletePasskey(deps: ConsoleDeps, ctx: Context) {
  const { lang, session } = stateOf(ctx);
  const id = String(ctx.params.passkeyId);
  const removed = await removePasskey(deps.db, session!.user.id, id);
  await audit(deps.db, ctx, {
    user: session!.user,
    action: 'passkey_remove',
    target: id.slice(0, 64),
    outcome: removed ? 'success' : 'denied',
    at: deps.clock(),
  });
  if (!removed) return forbidden(ctx);
  return securityPage(deps, ctx, 200, { tone: 'ok', text: ct(lang, 'passkey_removed') });
}
