import nodemailer from 'nodemailer';
import type { Settings } from '../config';

export type MessageKind = 'email' | 'sms';

/** One outbox row as the relay hands it to a transport. */
export interface OutboxMessage {
  id: number;
  kind: MessageKind;
  to: string;
  subject: string | null;
  body: string;
}

/** Sends one message or throws; the error's message is stored and logged, so it must not quote the body. */
export interface MessageTransport {
  /** Where it sends, without credentials, for the startup log. */
  readonly describe: string;
  send(message: OutboxMessage): Promise<void>;
  close?(): void;
}

/** The transports the relay has; a kind without one stays in the outbox. */
export type Transports = Partial<Record<MessageKind, MessageTransport>>;

const SMTP_CONNECT_TIMEOUT_MS = 10_000;
const SMTP_SOCKET_TIMEOUT_MS = 30_000;
export const SMS_TIMEOUT_MS = 10_000;

/** `scheme://host:port/path` of a URL: no user, password, query or fragment. */
function redacted(url: string): string {
  const u = new URL(url);
  return `${u.protocol}//${u.host}${u.pathname === '/' ? '' : u.pathname}`;
}

/**
 * E-mail through an SMTP server given as a URL (`smtp://user:pass@host:587` uses STARTTLS when the
 * server offers it, `smtps://` is TLS from the start; nodemailer's options in the query apply, e.g.
 * `?requireTLS=true`, or `?ignoreTLS=true` for a local test server). Plain-text body; one
 * connection per message.
 */
export function smtpTransport(input: { url: string; from: string }): MessageTransport {
  const mailer = nodemailer.createTransport({
    url: input.url,
    connectionTimeout: SMTP_CONNECT_TIMEOUT_MS,
    greetingTimeout: SMTP_CONNECT_TIMEOUT_MS,
    socketTimeout: SMTP_SOCKET_TIMEOUT_MS,
  });
  return {
    describe: redacted(input.url),
    async send(message) {
      const info = await mailer.sendMail({
        from: input.from,
        to: message.to,
        subject: message.subject ?? '',
        text: message.body,
      });
      if (info.rejected.length > 0) throw new Error(`SMTP server rejected the recipient: ${info.response}`);
    },
    close: () => mailer.close(),
  };
}

/**
 * SMS through an HTTP provider: `POST url` with `{"to": "+964…", "body": "…"}` as JSON and
 * `Authorization: Bearer <token>`. Any 2xx is success; anything else, or no answer within 10 s, is
 * an error naming the status (never the answer's body, which may echo the message).
 */
export function httpSmsTransport(input: { url: string; token: string; timeoutMs?: number }): MessageTransport {
  const timeoutMs = input.timeoutMs ?? SMS_TIMEOUT_MS;
  return {
    describe: redacted(input.url),
    async send(message) {
      let res: Response;
      try {
        res = await fetch(input.url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'application/json',
            authorization: `Bearer ${input.token}`,
          },
          body: JSON.stringify({ to: message.to, body: message.body }),
          signal: AbortSignal.timeout(timeoutMs),
          redirect: 'error',
        });
      } catch (err) {
        // The abort reason is a DOMException, not always an Error of this realm: go by its name.
        const { name, cause } = (err ?? {}) as { name?: unknown; cause?: { message?: unknown } };
        if (name === 'TimeoutError' || name === 'AbortError') {
          throw new Error(`SMS provider did not answer within ${timeoutMs / 1000} s`);
        }
        throw new Error(`SMS provider unreachable${typeof cause?.message === 'string' ? `: ${cause.message}` : ''}`);
      }
      await res.body?.cancel().catch(() => undefined);
      if (res.status < 200 || res.status > 299) throw new Error(`SMS provider answered HTTP ${res.status}`);
    },
  };
}

/** The transports the settings configure: SMTP_URL for e-mail, SMS_HTTP_URL (+ token) for SMS. */
export function transportsFromSettings(settings: Settings): Transports {
  const transports: Transports = {};
  if (settings.SMTP_URL) transports.email = smtpTransport({ url: settings.SMTP_URL, from: settings.MAIL_FROM });
  if (settings.SMS_HTTP_URL && settings.SMS_HTTP_TOKEN) {
    transports.sms = httpSmsTransport({ url: settings.SMS_HTTP_URL, token: settings.SMS_HTTP_TOKEN });
  }
  return transports;
}
