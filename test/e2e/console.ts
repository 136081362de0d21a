import AxeBuilder from '@axe-core/playwright';
import type { Browser, BrowserContext, CDPSession, Page } from 'playwright-core';
import { ct, type ConsoleMessageKey } from '../../src/console/messages';
import type { ConsoleRole } from '../../src/console/roles';
import { totpCode } from '../../src/console/totp';
import { langInfo, type Lang } from '../../src/hosted/i18n';
import { randomString } from '../../src/lib/ids';
import type { HttpsReceiver } from '../helpers/https-receiver';
import { ops } from '../helpers/partner';
import type { Stack } from '../helpers/stack';
import { useWebhookStack } from '../helpers/webhooks';
import { launchBrowser, newShopper, plain, screenshots } from './browser';

/**
 * The console's browser tests' shared set-up (test/e2e/console-*.test.ts): the stack, a tab in one
 * of the console's languages, an owner invited by the operator CLI who sets up the account,
 * sign-in with a code or a passkey (Chromium's virtual authenticator over CDP), and the checks
 * every page passes (its language and direction, and no serious or critical axe violation).
 */

export interface ConsoleEnv {
  stack: Stack;
  /** A real HTTPS receiver the stack may deliver webhooks to (its host allowed, its certificate trusted). */
  receiver: HttpsReceiver;
  browser: Browser;
}

/**
 * A test file's stack for the console on `localhost` (a passkey's relying party id is a domain
 * name, never an IP address), delivering webhooks to a real HTTPS receiver, and one Chromium:
 * started in `beforeAll`, stopped in `afterAll`; read the fields inside tests.
 */
export function useConsoleEnv(): ConsoleEnv {
  const env = useWebhookStack({ publicHost: 'localhost' }) as ConsoleEnv;
  beforeAll(async () => {
    env.browser = await launchBrowser();
  });
  afterAll(async () => {
    await env.browser?.close();
  });
  return env;
}

/** One console tab: a browser context of its own (cookies, a phone-width screen, a client IP) in one language. */
export interface ConsoleTab {
  page: Page;
  context: BrowserContext;
  lang: Lang;
  /** The console's words in the tab's language as a reader sees them (no bidi isolates). */
  t: (key: ConsoleMessageKey, vars?: Record<string, string | number>) => string;
  /** Script errors and refused requests (4xx, 5xx) the tab has seen; a flow ends with none. */
  problems: string[];
  /** False for a browser without script (where axe cannot run either). */
  scripted: boolean;
  /** Chromium's virtual authenticator, when asked for: a CTAP2 platform authenticator that verifies the user. */
  authenticator?: { cdp: CDPSession; id: string };
}

/** A tab whose browser asks for `lang` (Accept-Language), optionally with a virtual authenticator or without script. */
export async function openTab(
  env: ConsoleEnv,
  lang: Lang,
  opts: { authenticator?: boolean; javaScriptEnabled?: boolean } = {},
): Promise<ConsoleTab> {
  const context = await newShopper(env.browser, {
    locale: langInfo[lang].tag,
    javaScriptEnabled: opts.javaScriptEnabled,
  });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(e.message));
  // Any refused request but the browser's own favicon ask (the console has none).
  page.on('response', (r) => {
    if (r.status() >= 400 && !r.url().endsWith('/favicon.ico')) problems.push(`${r.status()} ${r.url()}`);
  });
  const tab: ConsoleTab = {
    page,
    context,
    lang,
    t: (key, vars) => plain(ct(lang, key, vars)),
    problems,
    scripted: opts.javaScriptEnabled ?? true,
  };
  if (opts.authenticator) {
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
    tab.authenticator = { cdp, id: authenticatorId };
  }
  return tab;
}

/**
 * No violation of impact serious or critical on the page as it is now (axe-core's rules). Legacy
 * mode runs axe in the page itself rather than finishing in a new blank page, which takes several
 * times as long; it only misses cross-origin frames, and the console has no frames.
 */
export async function expectAccessible(page: Page): Promise<void> {
  const { violations } = await new AxeBuilder({ page })
    .setLegacyMode(true)
    .options({ resultTypes: ['violations'] })
    .analyze();
  const bad = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  const where = new URL(page.url()).pathname;
  expect(
    bad.map((v) => `${where}: ${v.id} (${v.impact}) at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`),
  ).toEqual([]);
}

/**
 * The page is in the tab's language, with its direction (`rtl` for Arabic and Kurdish), no wider
 * than the screen (a phone's: only a table's own region scrolls sideways), and accessible. The
 * last two need script, so a tab without it checks only the first.
 */
export async function expectGoodPage(tab: ConsoleTab): Promise<void> {
  const { page } = tab;
  const html = page.locator('html');
  const { tag, dir } = langInfo[tab.lang];
  expect([await html.getAttribute('lang'), await html.getAttribute('dir')]).toEqual([tag, dir]);
  if (!tab.scripted) return;
  const overflow = await page.evaluate('document.documentElement.scrollWidth - window.innerWidth');
  expect([new URL(page.url()).pathname, overflow]).toEqual([new URL(page.url()).pathname, 0]);
  // The skip link, hidden until focused, shows inside the screen when it is (at the start side in RTL too).
  const skip = page.locator('a.skip');
  await skip.focus();
  const box = await skip.boundingBox();
  const width = (await page.evaluate('window.innerWidth')) as number;
  const inside = box !== null && box.x >= 0 && box.x + box.width <= width;
  expect([tab.lang, inside, (box?.width ?? 0) > 1]).toEqual([tab.lang, true, true]);
  await skip.blur();
  await expectAccessible(page);
}

/** Saves the page as `console-<lang>-<name>-<width>.png` under test/e2e/screenshots/ (see scripts/screenshot-console.ts). */
export const shoot = (tab: ConsoleTab, name: string, widths?: ReadonlyArray<'phone' | 'desktop'>) =>
  screenshots(tab.page, `console-${tab.lang}-${name}`, widths);

export interface ConsoleAccount {
  userId: string;
  email: string;
  password: string;
  /** The TOTP key the invite page showed. */
  totpSecret: string;
}

export type ConsoleTenant = { sellerId: string } | { merchantId: string };

/** The console's first page (`/console` sends a seller's user to the orders, a merchant's to the webhooks). */
const landed = (url: URL) => /^\/console\/(orders|developers\/webhooks)$/.test(url.pathname);

/** The next TOTP code of `secret` (the stack's clock moves one 30-second step first: a code works once). */
export function nextCode(stack: Stack, secret: string): string {
  stack.clock.advance(30_000);
  return totpCode(secret, stack.clock());
}

/**
 * The operator CLI invites a user of the tenant (`ops console-user invite`); in the tab the invitee
 * opens the one-time link, sets a password and TOTP (the first code proves it), is shown ten
 * recovery codes, and goes on to the console, signed in. Each page is checked.
 */
export async function acceptInvite(
  env: ConsoleEnv,
  tab: ConsoleTab,
  tenant: ConsoleTenant,
  role: ConsoleRole = 'owner',
): Promise<ConsoleAccount> {
  const { page, t } = tab;
  const email = `${role}-${randomString(8).toLowerCase()}@shop.example`;
  const password = `a long console password ${randomString(6)}`;
  const of = 'sellerId' in tenant ? ['--seller', tenant.sellerId] : ['--merchant', tenant.merchantId];
  const invite = await ops(env.stack.db, 'console-user', 'invite', ...of, '--email', email, '--role', role);
  // The CLI prints the link on its own PUBLIC_BASE_URL; the test's server is on another port.
  await page.goto(env.stack.baseUrl + new URL(invite.link).pathname);
  await expectGoodPage(tab);
  const totpSecret = (await page.locator('#totp-key').textContent())!;
  await page.getByLabel(t('new_password'), { exact: true }).fill(password);
  await page.getByLabel(t('confirm_password'), { exact: true }).fill(password);
  await page.getByLabel(t('code'), { exact: true }).fill(totpCode(totpSecret, env.stack.clock()));
  await page.getByRole('button', { name: t('create_account') }).click();
  await page.getByRole('heading', { name: t('recovery_title') }).waitFor();
  expect(await page.locator('#recovery-codes li').count()).toBe(10);
  await expectGoodPage(tab);
  await page.getByRole('link', { name: t('recovery_done') }).click();
  await page.waitForURL(landed);
  const user = await env.stack.db('console_users').where({ email }).first('id');
  return { userId: user.id, email, password, totpSecret };
}

/** Account › Security: adds a passkey named `name` (the tab's virtual authenticator answers the prompt). */
export async function addPasskey(tab: ConsoleTab, name: string): Promise<void> {
  const { page, t } = tab;
  await goTo(tab, 'nav_security');
  // The script shows the form once it finds the browser can use passkeys.
  const form = page.locator('form[data-passkey="register"]');
  await form.waitFor();
  await form.getByLabel(t('passkey_name')).fill(name);
  await form.getByRole('button', { name: t('add_passkey') }).click();
  await page.getByText(t('passkey_added')).waitFor();
  await expectGoodPage(tab);
}

/** Follows the console's navigation link to a section (`nav_orders`, `nav_webhooks`, …). */
export async function goTo(tab: ConsoleTab, section: ConsoleMessageKey): Promise<void> {
  const nav = tab.page.getByRole('navigation', { name: tab.t('console'), exact: true });
  await nav.getByRole('link', { name: tab.t(section), exact: true }).click();
}

export async function signOut(tab: ConsoleTab): Promise<void> {
  await tab.page.getByRole('button', { name: tab.t('sign_out') }).click();
  await tab.page.waitForURL('**/console/sign-in');
}

/**
 * Signs in from the sign-in page: e-mail and password, then the second factor, the next TOTP code
 * or the passkey (the tab's virtual authenticator), and ends on the console's first page. The
 * sign-in and verify pages are checked (the verify page with the passkey offered, when it is), and
 * `onVerify` runs on the verify page before the second factor is given.
 */
export async function signIn(
  env: ConsoleEnv,
  tab: ConsoleTab,
  account: ConsoleAccount,
  factor: 'code' | 'passkey',
  opts: { onVerify?: () => Promise<void> } = {},
): Promise<void> {
  const { page, t } = tab;
  if (!page.url().endsWith('/console/sign-in')) await page.goto(`${env.stack.baseUrl}/console/sign-in`);
  await expectGoodPage(tab);
  await page.getByLabel(t('email'), { exact: true }).fill(account.email);
  await page.getByLabel(t('password'), { exact: true }).fill(account.password);
  await page.getByRole('button', { name: t('continue') }).click();
  await page.waitForURL('**/console/sign-in/verify');
  // The code form is there in any case; a passkey is offered beside it once the script runs.
  await page.getByLabel(t('code'), { exact: true }).waitFor();
  const passkey = page.getByRole('button', { name: t('use_passkey') });
  if (factor === 'passkey') await passkey.waitFor();
  await expectGoodPage(tab);
  await opts.onVerify?.();
  if (factor === 'passkey') await passkey.click();
  else {
    await page.getByLabel(t('code'), { exact: true }).fill(nextCode(env.stack, account.totpSecret));
    await page.getByRole('button', { name: t('verify') }).click();
  }
  await page.waitForURL(landed);
}

/** On the re-authentication page: password and the next code; back to the page that asked. */
export async function reauthenticate(env: ConsoleEnv, tab: ConsoleTab, account: ConsoleAccount): Promise<void> {
  const { page, t } = tab;
  await page.waitForURL('**/console/reauth?next=*');
  await expectGoodPage(tab);
  await page.getByLabel(t('password'), { exact: true }).fill(account.password);
  await page.getByLabel(t('code'), { exact: true }).fill(nextCode(env.stack, account.totpSecret));
  await page.getByRole('button', { name: t('verify') }).click();
  await page.waitForURL((url) => url.pathname !== '/console/reauth');
}

/**
 * Opens `url` (a page's GET: an action's answer is the page at the action's URL, which a reload
 * would post again) until `ready` holds; real time, as deliveries and payments run in the worker.
 */
export async function openUntil(
  page: Page,
  url: string,
  ready: () => Promise<boolean>,
  what: string,
  timeoutMs = 30_000,
) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await page.goto(url);
    if (await ready()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} on ${url}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
