import { createSeller } from '../../src/ops/sellers';
import { randomString } from '../../src/lib/ids';
import { auditRows } from '../helpers/console';
import { acceptInvite, addPasskey, expectGoodPage, goTo, openTab, signIn, signOut, useConsoleEnv } from './console';

/**
 * Console passkeys in headless Chromium with its virtual authenticator (Chrome DevTools Protocol,
 * WebAuthn domain: a CTAP2 platform authenticator that verifies the user), beyond the seller's
 * flow (console-seller.test.ts, which signs in with one): what is stored is the authenticator's
 * credential, a passkey sign-in is audited with the passkey and marks it used, a browser without
 * script signs in with a code as ever, the passkey alone re-authenticates (audited with it), and a
 * removed passkey leaves the code as the second factor.
 */
jest.setTimeout(180_000);

const env = useConsoleEnv();

it('stores the authenticator’s credential, audits the passkey sign-in, keeps the code without script, re-authenticates with the passkey, and removes it', async () => {
  const seller = await createSeller(env.stack.db, { name: `Passkey seller ${randomString(6)}`, locations: 1 });
  const tab = await openTab(env, 'en', { authenticator: true });
  const { page, t } = tab;
  const owner = await acceptInvite(env, tab, { sellerId: seller.seller_id });
  await goTo(tab, 'nav_security');
  await page.getByText(t('no_passkeys')).waitFor();
  await addPasskey(tab, 'Test laptop');
  expect(await page.locator('#passkeys tbody tr td').first().textContent()).toBe('Test laptop');
  const { cdp, id } = tab.authenticator!;
  const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId: id });
  expect(credentials).toHaveLength(1);
  const stored = await env.stack.db('console_passkeys').where({ user_id: owner.userId }).first();
  expect(Buffer.from(credentials[0].credentialId, 'base64').toString('base64url')).toBe(stored.credential_id);
  expect(stored.transports).toEqual(['internal']);

  await signOut(tab);
  await signIn(env, tab, owner, 'passkey');
  const signedIn = (await auditRows(env.stack.db, owner.userId)).filter((r) => r.action === 'sign_in').at(-1);
  expect([signedIn?.outcome, signedIn?.detail]).toEqual(['success', { factor: 'passkey', passkey_id: stored.id }]);
  const used = await env.stack.db('console_passkeys').where({ id: stored.id }).first('last_used_at');
  expect(used.last_used_at).not.toBeNull();

  // Without script the passkey stays out of sight and the code form signs in as ever.
  const plain = await openTab(env, 'en', { javaScriptEnabled: false });
  await signIn(env, plain, owner, 'code', {
    onVerify: async () =>
      expect(await plain.page.getByRole('button', { name: t('use_passkey') }).isVisible()).toBe(false),
  });
  await plain.context.close();

  // Six minutes on, removing it asks to confirm again: the passkey alone does (user verified).
  env.stack.clock.advance(6 * 60_000);
  await goTo(tab, 'nav_security');
  await page.getByRole('button', { name: `${t('remove')} Test laptop` }).click();
  await page.waitForURL('**/console/reauth?next=*');
  await page.getByRole('button', { name: t('use_passkey') }).waitFor();
  await expectGoodPage(tab);
  await page.getByRole('button', { name: t('use_passkey') }).click();
  await page.waitForURL('**/console/account/security');
  const reauth = (await auditRows(env.stack.db, owner.userId)).filter((r) => r.action === 'reauthenticate').at(-1);
  expect([reauth?.outcome, reauth?.detail]).toEqual(['success', { factor: 'passkey', passkey_id: stored.id }]);

  // Removing it leaves the code as the second factor.
  await page.getByRole('button', { name: `${t('remove')} Test laptop` }).click();
  await page.getByText(t('passkey_removed')).waitFor();
  await page.getByText(t('no_passkeys')).waitFor();
  await signOut(tab);
  await signIn(env, tab, owner, 'code', {
    onVerify: async () => expect(await page.getByRole('button', { name: t('use_passkey') }).count()).toBe(0),
  });
  expect([tab.problems, plain.problems]).toEqual([[], []]);
  await tab.context.close();
});
