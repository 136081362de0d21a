import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { newId } from '../../src/lib/ids';
import { loadSettings } from '../../src/config';
import { createDb, type Db } from '../../src/db/knex';
import { outboxSms } from '../../src/checkout/public/sms';
import { disableIfStillFailing } from '../../src/webhooks/record';
import {
  MAX_ATTEMPTS,
  OutboxRelay,
  RETRY_DELAYS_MS,
  startOutboxRelay,
  type OutboxRelayDeps,
} from '../../src/messaging/relay';
import {
  httpSmsTransport,
  smtpTransport,
  transportsFromSettings,
  type MessageTransport,
} from '../../src/messaging/transports';
import { buildMerchant } from '../helpers/factories';
import { readRunEnv, testClock, type TestClock } from '../helpers/stack';

/**
 * The outbox relay against the run's database, a local HTTP server standing in for the SMS
 * provider and a local SMTP receiver. Other test files write to the same outbox, so every relay
 * here takes only the addresses this file made up (`onlyTo`).
 */
let db: Db;
let clock: TestClock;
const relays: OutboxRelay[] = [];
const logLines: string[] = [];

const SMS_TOKEN = 'sms-test-token-123';
let counter = 0;
/** A phone number no other test file uses. */
const phone = () => `+9647${String(Date.now() % 1e6).padStart(6, '0')}${String(++counter).padStart(3, '0')}`;

// ---- the SMS provider ------------------------------------------------------------------------
interface SmsRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  json: { to: string; body: string };
}
let smsServer: Server;
let smsUrl: string;
const smsRequests: SmsRequest[] = [];
/** Statuses to answer per number, in order; then 200. */
const smsScript = new Map<string, number[]>();

// ---- the SMTP receiver -----------------------------------------------------------------------
interface ReceivedMail {
  user: unknown;
  mailFrom: string;
  rcptTo: string[];
  raw: string;
}
let smtpServer: SMTPServer;
let smtpPort: number;
const mails: ReceivedMail[] = [];

beforeAll(async () => {
  db = createDb(readRunEnv().databaseUrl, 6);

  smsServer = createServer((req, res) => {
    let data = '';
    req.on('data', (c: Buffer) => (data += c.toString('utf8')));
    req.on('end', () => {
      const json = JSON.parse(data) as SmsRequest['json'];
      smsRequests.push({ method: req.method!, path: req.url!, headers: req.headers, json });
      const status = smsScript.get(json.to)?.shift() ?? 200;
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ echo: json.body }));
    });
  });
  await new Promise<void>((resolve) => smsServer.listen(0, '127.0.0.1', resolve));
  smsUrl = `http://127.0.0.1:${(smsServer.address() as AddressInfo).port}/v1/messages`;

  smtpServer = new SMTPServer({
    secure: false,
    logger: false,
    authMethods: ['PLAIN', 'LOGIN'],
    allowInsecureAuth: true,
    onAuth(auth, _session, callback) {
      if (auth.username === 'relay' && auth.password === 's3cret') callback(null, { user: 'relay' });
      else callback(new Error('Invalid username or password'));
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        mails.push({
          user: session.user,
          mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          rcptTo: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks).toString('utf8'),
        });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => smtpServer.listen(0, '127.0.0.1', () => resolve()));
  smtpPort = (smtpServer.server.address() as AddressInfo).port;
});

beforeEach(() => {
  clock = testClock(); // each test starts at the real time, as the rows' database defaults do
});

/**
 * Freezes the test clock with the rows just queued already due. The database stamps a row's
 * `next_attempt_at` in microseconds and the clock counts milliseconds: frozen within the insert's
 * millisecond, the clock would stand just before the row's time and the relay would not claim it.
 */
function freezeWithRowsDue(): void {
  clock.freeze(new Date(Date.now() + 1));
}

afterEach(async () => {
  await Promise.all(relays.splice(0).map((r) => r.stop()));
});

afterAll(async () => {
  await new Promise<void>((resolve) => smsServer.close(() => resolve()));
  await new Promise<void>((resolve) => smtpServer.close(() => resolve()));
  await db.destroy();
});

/** A relay over this file's addresses, on the test clock, polling only once a minute (NOTIFY does the rest). */
function relay(deps: Partial<OutboxRelayDeps> & Pick<OutboxRelayDeps, 'transports' | 'onlyTo'>): OutboxRelay {
  const r = startOutboxRelay({
    db,
    now: clock,
    pollEveryMs: 60_000,
    log: {
      info: (msg, fields = {}) => logLines.push(JSON.stringify({ msg, ...fields })),
      warn: (msg, fields = {}) => logLines.push(JSON.stringify({ msg, ...fields })),
      error: (msg, fields = {}) => logLines.push(JSON.stringify({ msg, ...fields })),
    },
    ...deps,
  });
  relays.push(r);
  return r;
}

const sms = () => httpSmsTransport({ url: smsUrl, token: SMS_TOKEN });
const email = () =>
  smtpTransport({
    url: `smtp://relay:s3cret@127.0.0.1:${smtpPort}?ignoreTLS=true`,
    from: 'Payments <no-reply@pay.test>',
  });

async function until<T>(check: () => Promise<T | undefined | false>, what: string, ms = 3000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const row = (id: number) => db('outbox').where({ id }).first();
const rowsTo = (to: string) => db('outbox').where({ to }).orderBy('id');

/** Headers (unfolded) and the decoded text body of a single-part message. */
function parseMail(raw: string): { headers: Record<string, string>; text: string } {
  const [head, ...rest] = raw.split('\r\n\r\n');
  const headers: Record<string, string> = {};
  for (const line of head.replace(/\r\n[ \t]+/g, ' ').split('\r\n')) {
    const i = line.indexOf(':');
    headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
  }
  let body = rest.join('\r\n\r\n');
  const encoding = headers['content-transfer-encoding']?.toLowerCase();
  if (encoding === 'quoted-printable') {
    body = Buffer.from(
      body.replace(/=\r\n/g, '').replace(/=([0-9A-F]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16))),
      'latin1',
    ).toString('utf8');
  } else if (encoding === 'base64') {
    body = Buffer.from(body, 'base64').toString('utf8');
  }
  return { headers, text: body.replace(/\r\n/g, '\n').trimEnd() };
}

describe('SMS over HTTP', () => {
  it('POSTs {to, body} as JSON with the bearer token; a 500 is retried on the backoff schedule, then sent', async () => {
    const to = phone();
    smsScript.set(to, [500]);
    const r = relay({ transports: { sms: sms() }, onlyTo: new Set([to]) });
    await r.ready;
    await r.drain(); // idle: from here only the insert's NOTIFY can wake it before the minute's poll

    // The OTP adapter inserts as before; the insert's NOTIFY wakes the relay.
    await outboxSms(db).send({ to, body: 'Your verification code is 482913' });
    const failed = await until(async () => {
      const [m] = await rowsTo(to);
      return m.attempts === 1 && m.last_error !== null && m;
    }, 'the first attempt');
    expect(failed.sent_at).toBeNull();
    expect(failed.last_error).toBe('SMS provider answered HTTP 500');
    const retryIn = new Date(failed.next_attempt_at).getTime() - clock().getTime();
    expect(retryIn).toBeGreaterThan(RETRY_DELAYS_MS[0] - 2000);
    expect(retryIn).toBeLessThanOrEqual(RETRY_DELAYS_MS[0]);

    const [request] = smsRequests.filter((q) => q.json.to === to);
    expect(request.method).toBe('POST');
    expect(request.path).toBe('/v1/messages');
    expect(request.headers['content-type']).toBe('application/json');
    expect(request.headers.authorization).toBe(`Bearer ${SMS_TOKEN}`);
    expect(request.json).toEqual({ to, body: 'Your verification code is 482913' });

    // Not due yet: nothing happens.
    clock.advance(RETRY_DELAYS_MS[0] - 5000);
    await r.drain();
    expect((await row(failed.id)).attempts).toBe(1);

    clock.advance(5000);
    await r.drain();
    const sent = await row(failed.id);
    expect(sent.attempts).toBe(2);
    expect(sent.sent_at).toBeInstanceOf(Date);
    expect(sent.next_attempt_at).toBeNull();
    expect(sent.last_error).toBe('SMS provider answered HTTP 500'); // the history of the failed attempt
    expect(smsRequests.filter((q) => q.json.to === to)).toHaveLength(2);
    // Once sent, the code has done its job: the outbox keeps the message with the code masked.
    expect(sent.body).toBe('Your verification code is ******');

    // Logs name ids and errors, never the code or the number.
    const logs = logLines.join('\n');
    expect(logs).toContain(`"id":${failed.id}`);
    expect(logs).not.toContain('482913');
    expect(logs).not.toContain(to);
  });

  it('never sends a test-mode SMS, even one that is due', async () => {
    const to = phone();
    await db('outbox').insert({ kind: 'sms', to, body: 'Your verification code is 909090', test_mode: true });
    const r = relay({ transports: { sms: sms() }, onlyTo: new Set([to]) });
    await r.drain();
    expect(smsRequests.filter((q) => q.json.to === to)).toEqual([]);
    expect(await rowsTo(to)).toEqual([
      expect.objectContaining({ attempts: 0, sent_at: null, body: 'Your verification code is 909090' }),
    ]);
  });

  it('gives an SMS up once a retry would fall past the 10 minutes an OTP code lives', async () => {
    const to = phone();
    smsScript.set(to, [503, 503, 503, 503, 503]);
    await outboxSms(db).send({ to, body: 'Your verification code is 111222' });
    freezeWithRowsDue();
    const r = relay({ transports: { sms: sms() }, onlyTo: new Set([to]) });
    await r.drain();
    clock.advance(RETRY_DELAYS_MS[0]);
    await r.drain();
    clock.advance(RETRY_DELAYS_MS[1]);
    await r.drain(); // the third attempt, 2.5 min in: a retry 10 min later would be too late
    const [m] = await rowsTo(to);
    expect(m).toMatchObject({ attempts: 3, sent_at: null, next_attempt_at: null });
    expect(m.last_error).toBe('SMS provider answered HTTP 503');
    clock.advance(60 * 60_000);
    await r.drain();
    expect((await row(m.id)).attempts).toBe(3);
    expect(smsRequests.filter((q) => q.json.to === to)).toHaveLength(3);
  });

  it('names an unreachable provider and a timeout in its error', async () => {
    const to = phone();
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const deadUrl = `http://127.0.0.1:${(closed.address() as AddressInfo).port}/`;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const silent = createServer(() => undefined); // never answers
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const message = { id: 0, kind: 'sms' as const, to, subject: null, body: 'x' };
      await expect(httpSmsTransport({ url: deadUrl, token: 't' }).send(message)).rejects.toThrow(
        /^SMS provider unreachable/,
      );
      const slow = httpSmsTransport({
        url: `http://127.0.0.1:${(silent.address() as AddressInfo).port}/`,
        token: 't',
        timeoutMs: 200,
      });
      await expect(slow.send(message)).rejects.toThrow('SMS provider did not answer within 0.2 s');
    } finally {
      silent.closeAllConnections();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });
});

describe('e-mail over SMTP', () => {
  it("sends the endpoint-disabled e-mail to the merchant's contact, logged in with the URL's user and password", async () => {
    const contact = `ops-${Date.now()}-${++counter}@merchant.test`;
    const r = relay({ transports: { email: email() }, onlyTo: new Set([contact]) });
    await r.ready;
    await r.drain();
    const merchant = await buildMerchant(db, { contactEmail: contact });
    const endpointId = newId('we');
    await db('webhook_endpoints').insert({
      id: endpointId,
      merchant_id: merchant.merchantId,
      mode: 'test',
      url: 'https://hooks.merchant.test/payments',
      events: JSON.stringify(['*']),
      status: 'enabled',
      secret_ciphertext: 'unused',
      failing_since: new Date(Date.now() - 4 * 24 * 60 * 60_000),
    });

    expect((await disableIfStillFailing(db, endpointId, Date.now())).disabled).toBe(true);
    const mail = await until(async () => mails.find((m) => m.rcptTo.includes(contact)), 'the e-mail');
    expect(mail.user).toBe('relay');
    expect(mail.mailFrom).toBe('no-reply@pay.test');
    expect(mail.rcptTo).toEqual([contact]);
    const { headers, text } = parseMail(mail.raw);
    expect(headers.subject).toBe('Webhook endpoint disabled: https://hooks.merchant.test/payments');
    expect(headers.from).toBe('Payments <no-reply@pay.test>');
    expect(headers.to).toBe(contact);
    expect(text).toContain(
      `Every delivery to your test webhook endpoint ${endpointId} (https://hooks.merchant.test/payments)`,
    );
    expect(text).toContain(`PATCH /v1/webhook_endpoints/${endpointId}`);

    const [m] = await until(async () => {
      const rows = await rowsTo(contact);
      return rows[0]?.sent_at && rows;
    }, 'sent_at');
    expect(m).toMatchObject({ kind: 'email', attempts: 1, last_error: null, next_attempt_at: null });
  });

  it('records a refused login as the error and retries', async () => {
    const contact = `ops-${Date.now()}-${++counter}@merchant.test`;
    const wrong = smtpTransport({
      url: `smtp://relay:wrong@127.0.0.1:${smtpPort}?ignoreTLS=true`,
      from: 'Payments <no-reply@pay.test>',
    });
    await db('outbox').insert({ kind: 'email', to: contact, subject: 'Hello', body: 'Hi there' });
    freezeWithRowsDue();
    const r = relay({ transports: { email: wrong }, onlyTo: new Set([contact]) });
    await r.drain();
    const [m] = await rowsTo(contact);
    expect(m).toMatchObject({ attempts: 1, sent_at: null });
    expect(m.last_error).toMatch(/Invalid login|535/);
    expect(new Date(m.next_attempt_at).getTime()).toBe(clock().getTime() + RETRY_DELAYS_MS[0]);
  });

  it('gives an e-mail up after MAX_ATTEMPTS failures on the schedule', async () => {
    const contact = `ops-${Date.now()}-${++counter}@merchant.test`;
    let tries = 0;
    const failing: MessageTransport = {
      describe: 'failing',
      send: () => Promise.reject(new Error(`try ${++tries} refused`)),
    };
    await db('outbox').insert({ kind: 'email', to: contact, subject: 'Hello', body: 'Hi there' });
    freezeWithRowsDue();
    const r = relay({ transports: { email: failing }, onlyTo: new Set([contact]) });
    await r.drain();
    for (const delay of RETRY_DELAYS_MS) {
      clock.advance(delay - 1);
      await r.drain();
      clock.advance(1);
      await r.drain();
    }
    expect(tries).toBe(MAX_ATTEMPTS);
    const [m] = await rowsTo(contact);
    expect(m).toMatchObject({ attempts: MAX_ATTEMPTS, sent_at: null, next_attempt_at: null });
    expect(m.last_error).toBe(`try ${MAX_ATTEMPTS} refused`);
    clock.advance(24 * 60 * 60_000);
    await r.drain();
    expect(tries).toBe(MAX_ATTEMPTS);
  });
});

describe('claiming', () => {
  it('leaves a kind without a transport in the outbox, unsent and untouched', async () => {
    const contact = `ops-${Date.now()}-${++counter}@merchant.test`;
    const to = phone();
    const r = relay({ transports: { sms: sms() }, onlyTo: new Set([contact, to]) });
    await r.ready;
    await r.drain();
    await db('outbox').insert({ kind: 'email', to: contact, subject: 'Hello', body: 'Hi there' });
    await outboxSms(db).send({ to, body: 'Your verification code is 333444' });
    await until(async () => (await rowsTo(to))[0]?.sent_at, 'the SMS');
    await r.drain();
    const [m] = await rowsTo(contact);
    expect(m).toMatchObject({ sent_at: null, attempts: 0, last_error: null });
    expect(m.next_attempt_at).toBeInstanceOf(Date); // still queued for when e-mail is configured
  });

  it('does not send a message queued longer ago than its kind lives (a backlog from before a transport)', async () => {
    const to = phone();
    const r = relay({ transports: { sms: sms() }, onlyTo: new Set([to]) });
    const [{ id }] = await db('outbox')
      .insert({
        kind: 'sms',
        to,
        body: 'Your verification code is 555666',
        created_at: new Date(Date.now() - 11 * 60_000),
      })
      .returning('id');
    await r.drain();
    expect(await row(id)).toMatchObject({ sent_at: null, attempts: 0, next_attempt_at: null });
    expect((await row(id)).last_error).toBe('not sent before it expired');
    expect(smsRequests.filter((q) => q.json.to === to)).toHaveLength(0);
  });

  it('sends each message once with two relays running (FOR UPDATE SKIP LOCKED)', async () => {
    const numbers = Array.from({ length: 24 }, () => phone());
    const only = new Set(numbers);
    const transport = sms();
    const sentBy = { a: 0, b: 0 };
    const slow = (name: 'a' | 'b'): MessageTransport => ({
      describe: name,
      send: async (m) => {
        await new Promise((resolve) => setTimeout(resolve, 15));
        await transport.send(m);
        sentBy[name] += 1;
      },
    });
    const a = relay({ transports: { sms: slow('a') }, onlyTo: only, batchSize: 3 });
    const b = relay({ transports: { sms: slow('b') }, onlyTo: only, batchSize: 3 });
    await db('outbox').insert(
      numbers.map((to) => ({ kind: 'sms', to, body: `Your verification code is ${to.slice(-6)}` })),
    );
    await Promise.all([a.drain(), b.drain()]);
    await until(async () => {
      const rows = await db('outbox').whereIn('to', numbers).whereNotNull('sent_at');
      return rows.length === numbers.length;
    }, 'all sent');
    const perNumber = numbers.map((to) => smsRequests.filter((q) => q.json.to === to).length);
    expect(perNumber).toEqual(numbers.map(() => 1));
    const rows = await db('outbox').whereIn('to', numbers);
    expect(rows.every((m: { attempts: number }) => m.attempts === 1)).toBe(true);
    expect(sentBy.a + sentBy.b).toBe(numbers.length);
    expect(sentBy.a).toBeGreaterThan(0); // both relays took a share
    expect(sentBy.b).toBeGreaterThan(0);
  });
});

describe('settings', () => {
  const base = { DATABASE_URL: 'postgres://x@127.0.0.1/db' };

  it('configures no transport by default: messages stay in the outbox', () => {
    const settings = loadSettings(base);
    expect(settings.MAIL_FROM).toBe('Payments <no-reply@localhost>');
    expect(transportsFromSettings(settings)).toEqual({});
  });

  it('builds SMTP and HTTP SMS transports and describes them without credentials', () => {
    const transports = transportsFromSettings(
      loadSettings({
        ...base,
        SMTP_URL: 'smtp://user:pa55@mail.example.com:587',
        SMS_HTTP_URL: 'https://sms.example.com/v1/send?key=abc',
        SMS_HTTP_TOKEN: 'tok',
      }),
    );
    expect(transports.email?.describe).toBe('smtp://mail.example.com:587');
    expect(transports.sms?.describe).toBe('https://sms.example.com/v1/send');
    transports.email?.close?.();
  });

  it('refuses a non-SMTP mail URL, a plain-http SMS URL off this machine and a URL without its token', () => {
    expect(() => loadSettings({ ...base, SMTP_URL: 'https://mail.example.com' })).toThrow(/SMTP_URL/);
    expect(() => loadSettings({ ...base, SMS_HTTP_URL: 'http://sms.example.com/', SMS_HTTP_TOKEN: 't' })).toThrow(
      /SMS_HTTP_URL/,
    );
    expect(() => loadSettings({ ...base, SMS_HTTP_URL: 'https://sms.example.com/' })).toThrow(/SMS_HTTP_TOKEN/);
    expect(() => loadSettings({ ...base, SMS_HTTP_TOKEN: 't' })).toThrow(/SMS_HTTP_URL/);
    expect(loadSettings({ ...base, SMS_HTTP_URL: 'http://127.0.0.1:9/', SMS_HTTP_TOKEN: 't' }).SMS_HTTP_URL).toBe(
      'http://127.0.0.1:9/',
    );
  });
});
