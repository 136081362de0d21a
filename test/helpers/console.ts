import { randomUUID } from 'node:crypto';
import type { Db } from '../../src/db/knex';
import { createDemoUser } from '../../src/console/accounts';
import type { ConsoleRole } from '../../src/console/roles';
import { totpCode } from '../../src/console/totp';
import { webhookRuntime } from '../../src/webhooks/runtime';
import type { Stack } from './stack';

/** A console user made directly (as `ops demo` does), with a known password and TOTP secret. */
export async function consoleUser(
  stack: Stack,
  tenant: { sellerId: string } | { merchantId: string },
  role: ConsoleRole,
) {
  // Unique across the whole database, which jest's workers share (a counter per worker is not).
  const id = randomUUID();
  const email = `user-${id}@console.example.com`;
  const password = `correct horse ${id.slice(0, 8)} battery`;
  const { user, totpSecret } = await createDemoUser(stack.db, webhookRuntime(stack.settings).cipher, {
    ...tenant,
    email,
    role,
    password,
    now: stack.clock(),
  });
  return { ...user, password, totpSecret };
}
export type TestConsoleUser = Awaited<ReturnType<typeof consoleUser>>;

export interface ConsoleResponse {
  status: number;
  headers: Headers;
  text: string;
  location: string | null;
}

/**
 * A browser as the console sees one: a cookie jar, the CSRF token of the last page read, and
 * same-origin form posts (Origin, Sec-Fetch-Site and the Referer of the last page read, as Chromium
 * sends them under the console's same-origin referrer policy). Redirects are not followed.
 */
export class ConsoleBrowser {
  readonly cookies = new Map<string, string>();
  csrf = '';
  /** The path of the last page read (a post's Referer). */
  page: string | null = null;
  constructor(
    readonly stack: Stack,
    readonly ip = `10.9.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}`,
  ) {}

  private async send(method: string, path: string, init: { body?: string; headers?: Record<string, string> } = {}) {
    const cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const res = await fetch(this.stack.baseUrl + path, {
      method,
      redirect: 'manual',
      headers: { ...(cookie && { cookie }), 'x-forwarded-for': this.ip, 'accept-language': 'en', ...init.headers },
      body: init.body,
    });
    for (const set of res.headers.getSetCookie()) {
      const [pair] = set.split(';');
      const eq = pair.indexOf('=');
      const [name, value] = [pair.slice(0, eq), pair.slice(eq + 1)];
      if (/Max-Age=0/.test(set)) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    const text = await res.text();
    const csrf = /name="csrf_token" value="([^"]+)"/.exec(text);
    if (csrf) this.csrf = csrf[1];
    return { status: res.status, headers: res.headers, text, location: res.headers.get('location') };
  }

  get(path: string): Promise<ConsoleResponse> {
    this.page = path;
    return this.send('GET', path);
  }

  /** A form post with the page's CSRF token (unless `csrf: null`) from the console's origin (unless `origin` says otherwise). */
  post(
    path: string,
    fields: Record<string, string | string[]> = {},
    opts: { csrf?: string | null; origin?: string | null; fetchSite?: string | null } = {},
  ): Promise<ConsoleResponse> {
    const form = new URLSearchParams();
    const token = opts.csrf === undefined ? this.csrf : opts.csrf;
    if (token !== null) form.set('csrf_token', token);
    for (const [k, v] of Object.entries(fields)) for (const one of [v].flat()) form.append(k, one);
    const origin = opts.origin === undefined ? this.stack.baseUrl : opts.origin;
    const site = opts.fetchSite === undefined ? 'same-origin' : opts.fetchSite;
    return this.send('POST', path, {
      body: form.toString(),
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        ...(origin !== null && { origin }),
        ...(site !== null && { 'sec-fetch-site': site }),
        ...(this.page !== null && site === 'same-origin' && { referer: this.stack.baseUrl + this.page }),
      },
    });
  }

  /** The next TOTP code (the clock moves one 30 s step first: a code works once). */
  nextCode(user: TestConsoleUser): string {
    this.stack.clock.advance(30_000);
    return totpCode(user.totpSecret, this.stack.clock());
  }

  /** Password, then code; ends signed in (throws otherwise). */
  async signIn(user: TestConsoleUser): Promise<void> {
    await this.get('/console/sign-in');
    const first = await this.post('/console/sign-in', { email: user.email, password: user.password });
    if (first.status !== 303) throw new Error(`sign-in: ${first.status}`);
    await this.get('/console/sign-in/verify');
    const second = await this.post('/console/sign-in/verify', { code: this.nextCode(user) });
    if (second.status !== 303) throw new Error(`second factor: ${second.status}`);
    await this.get('/console/account/sessions');
  }
}

export const auditRows = (db: Db, userId: string) =>
  db('console_audit_log').where({ user_id: userId }).orderBy('id').select('action', 'outcome', 'target', 'detail');
