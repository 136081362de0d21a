import AxeBuilder from '@axe-core/playwright';
import type { Browser, Page } from 'playwright-core';
import { totpCode } from '../../src/console/totp';
import { buildSeller } from '../helpers/factories';
import { auditRows } from '../helpers/console';
import { ops } from '../helpers/partner';
import { startStack, type Stack } from '../helpers/stack';
import { launchBrowser, newShopper } from './browser';

/**
 * Console passkeys in headless Chromium with its virtual authenticator (Chrome DevTools Protocol,
 * WebAuthn domain: a CTAP2 platform authenticator that verifies the user): an owner set up by
 * invite adds a passkey on Account › Security, signs out, signs in with the password and the
 * passkey as the second factor, and later re-authenticates with the passkey alone. The console is
 * on `localhost` (a passkey's relying party id is a domain name, never an IP address).
 */
jest.setTimeout(120_000);

let stack: Stack;
let browser: Browser;
beforeAll(async () => {
  stack = await startStack({}, { publicHost: 'localhost' });
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await stack?.stop();
});

async function expectAccessible(page: Page) {
  const { violations } = await new AxeBuilder({ page }).analyze();
  const bad = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  expect(bad.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`)).toEqual([]);
}

it('an owner adds a passkey on Account › Security and signs in with it as the second factor', async () => {
  const seller = await buildSeller(stack.db);
  const email = `passkey-${Date.now()}@shop.example`;
  const invite = await ops(
    stack.db,
    'console-user',
    'invite',
    '--seller',
    seller.seller_id,
    '--email',
    email,
    '--role',
    'owner',
  );
  const password = 'a long console password';

  const context = await newShopper(browser, { locale: 'en-US' });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  // Any refused request but the browser's own favicon ask (the console has none).
  page.on('response', (r) => {
    if (r.status() >= 400 && !r.url().endsWith('/favicon.ico')) errors.push(`${r.status()} ${r.url()}`);
  });
  const cdp = await context.newCDPSession(page);
  await cdp.send('WebAuthn.enable');
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: {
      protocol: 'ctap2',
      transport: 'internal',
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
      automaticPresenceSimulation: true,
    },
  });

  await page.goto(stack.baseUrl + new URL(invite.link).pathname);
  const secret = (await page.locator('#totp-key').textContent())!;
  await page.getByLabel('New password (at least 12 characters)').fill(password);
  await page.getByLabel('Password again').fill(password);
  await page.getByLabel('Code').fill(totpCode(secret, stack.clock()));
  await page.getByRole('button', { name: 'Create account' }).click();
  await page.getByRole('heading', { name: 'Save your recovery codes' }).waitFor();
  await page.getByRole('link', { name: 'I saved them: go to the console' }).click();

  // Account › Security: the script shows the passkey form; the browser's prompt answers by itself.
  await page.getByRole('link', { name: 'Security' }).click();
  await page.getByText('No passkeys yet.').waitFor();
  await page.getByLabel('Name of the passkey (for example: Laptop)').fill('Test laptop');
  await page.getByRole('button', { name: 'Add a passkey' }).click();
  await page.getByText('Passkey added.').waitFor();
  expect(await page.locator('#passkeys tbody tr td').first().textContent()).toBe('Test laptop');
  await expectAccessible(page);
  const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
  expect(credentials).toHaveLength(1);
  const user = await stack.db('console_users').where({ email }).first('id');
  const stored = await stack.db('console_passkeys').where({ user_id: user.id }).first();
  expect(Buffer.from(credentials[0].credentialId, 'base64').toString('base64url')).toBe(stored.credential_id);
  expect(stored.transports).toEqual(['internal']);

  // Out, and in again: the password, then the passkey instead of a code.
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.waitForURL('**/console/sign-in');
  await page.getByLabel('E-mail').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Continue' }).click();
  await page.waitForURL('**/console/sign-in/verify');
  // The code form is there as ever, the passkey offered beside it.
  await page.getByLabel('Code').waitFor();
  await expectAccessible(page);
  await page.getByRole('button', { name: 'Use a passkey' }).click();
  await page.waitForURL('**/console/orders');
  expect(await page.locator('.who').textContent()).toContain(email);

  const signIn = (await auditRows(stack.db, user.id)).filter((r) => r.action === 'sign_in').at(-1);
  expect([signIn?.outcome, signIn?.detail]).toEqual(['success', { factor: 'passkey', passkey_id: stored.id }]);
  const used = await stack.db('console_passkeys').where({ id: stored.id }).first('last_used_at');
  expect(used.last_used_at).not.toBeNull();
  expect(errors).toEqual([]);

  // Without script the passkey stays out of sight and the code form signs in as ever.
  const noScript = await browser.newContext({ javaScriptEnabled: false, locale: 'en-US' });
  const plain = await noScript.newPage();
  await plain.goto(`${stack.baseUrl}/console/sign-in`);
  await plain.getByLabel('E-mail').fill(email);
  await plain.getByLabel('Password').fill(password);
  await plain.getByRole('button', { name: 'Continue' }).click();
  await plain.waitForURL('**/console/sign-in/verify');
  expect(await plain.getByRole('button', { name: 'Use a passkey' }).isVisible()).toBe(false);
  stack.clock.advance(30_000);
  await plain.getByLabel('Code').fill(totpCode(secret, stack.clock()));
  await plain.getByRole('button', { name: 'Verify' }).click();
  await plain.waitForURL('**/console/orders');
  await noScript.close();

  // Six minutes on, removing it asks to confirm again: the passkey alone does (user verified).
  stack.clock.advance(6 * 60_000);
  await page.getByRole('link', { name: 'Security' }).click();
  await page.getByRole('button', { name: 'Remove Test laptop' }).click();
  await page.waitForURL('**/console/reauth?next=*');
  await page.getByLabel('Password').waitFor();
  await expectAccessible(page);
  await page.getByRole('button', { name: 'Use a passkey' }).click();
  await page.waitForURL('**/console/account/security');
  const reauth = (await auditRows(stack.db, user.id)).filter((r) => r.action === 'reauthenticate').at(-1);
  expect([reauth?.outcome, reauth?.detail]).toEqual(['success', { factor: 'passkey', passkey_id: stored.id }]);

  // Removing it leaves the code as the second factor.
  await page.getByRole('button', { name: 'Remove Test laptop' }).click();
  await page.getByText('Passkey removed.').waitFor();
  await page.getByText('No passkeys yet.').waitFor();

  // The page in Arabic and Kurdish: right to left, accessible, the passkey form shown by the script.
  for (const [lang, title] of [
    ['ar', 'الحساب › الأمان'],
    ['ku', 'هەژمار › ئاسایش'],
  ]) {
    await page.goto(`${stack.baseUrl}/console/account/security?lang=${lang}`);
    expect([await page.locator('html').getAttribute('dir'), await page.locator('h1').textContent()]).toEqual([
      'rtl',
      title,
    ]);
    await page.locator('form[data-passkey="register"]').waitFor();
    await expectAccessible(page);
  }
  expect(errors).toEqual([]);
  await context.close();
});
