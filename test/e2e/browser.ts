import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { findSystemBinary } from '../../scripts/system-packages';
import { randomIp } from '../helpers/checkout-payments';

/**
 * Headless Chromium for the browser tests: Debian's `chromium` package driven by playwright-core
 * (which never downloads a browser). `npm test` installs the package when these tests are
 * selected (scripts/system-packages.ts); a Chromium still missing fails them, never skips them.
 */

/** The flags this machine needs: no sandbox as root, and no background connections (the network is closed). */
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** The Chromium binary: CHROMIUM_PATH, else `chromium` on PATH. */
export function chromiumPath(): string {
  const path = findSystemBinary('chromium');
  if (!path) {
    throw new Error(
      "Chromium is not installed, so the browser tests cannot run. Run them through `npm test`, which installs Debian's " +
        'package, or install it yourself (apt-get install -y chromium), or set CHROMIUM_PATH to a Chromium binary.',
    );
  }
  return path;
}

/** One browser per test file; Playwright gives it a new, empty user-data-dir. */
export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: chromiumPath(), headless: true, args: FLAGS });
}

export const PHONE = { width: 390, height: 844 };
export const DESKTOP = { width: 1280, height: 860 };

/**
 * A new shopper: its own cookies, a phone-width screen and its own client IP (sent as
 * X-Forwarded-For), so the public per-IP limits of one test never touch another's.
 */
export function newShopper(
  browser: Browser,
  opts: { locale?: string; javaScriptEnabled?: boolean } = {},
): Promise<BrowserContext> {
  return browser.newContext({
    viewport: PHONE,
    locale: opts.locale ?? 'en-US',
    javaScriptEnabled: opts.javaScriptEnabled ?? true,
    extraHTTPHeaders: { 'x-forwarded-for': randomIp() },
  });
}

/** Where the browser tests save their screenshots (scripts/screenshot-console.ts copies some to docs/). */
export const SCREENSHOTS = join(__dirname, 'screenshots');

const WIDTHS = { phone: PHONE, desktop: DESKTOP } as const;

/**
 * Saves the page at phone and desktop width (or only the `widths` given) as `<name>-phone.png` and
 * `<name>-desktop.png` under test/e2e/screenshots/ (not committed).
 */
export async function screenshots(
  page: Page,
  name: string,
  widths: ReadonlyArray<keyof typeof WIDTHS> = ['phone', 'desktop'],
): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const before = page.viewportSize() ?? PHONE;
  for (const [label, size] of widths.map((w) => [w, WIDTHS[w]] as const)) {
    await page.setViewportSize(size);
    await page.evaluate('window.scrollTo(0, 0)');
    await page.screenshot({ path: join(SCREENSHOTS, `${name}-${label}.png`), fullPage: true, animations: 'disabled' });
  }
  await page.setViewportSize(before);
}

/** Text as a reader sees it: no bidi isolates, no-break spaces as spaces. */
export const plain = (text: string | null): string =>
  (text ?? '')
    .replace(/[\u2066-\u2069]/g, '')
    .replace(/\s+/g, ' ')
    .trim();
