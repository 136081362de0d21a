import { z } from 'zod';
import { DB_DEADLINE_DEFAULTS } from './db/deadlines';
import { defaultTaskQueue } from './temporal/names';
import { TEMPORAL_CALL_TIMEOUT_MS } from './temporal/deadlines';
import { DELIVERY_TIMEOUT_MS } from './webhooks/schedule';

const LOOPBACK_HOST = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/;
/** A Worker Deployment build id as the server takes it, without quotes (it goes into visibility queries). */
export const BUILD_ID_PATTERN = /^(?!__)[^\s"'\\]{1,255}$/;

/** A metrics port: a TCP port, or `off` / `0` for no metrics server. */
const metricsPort = (fallback: number) =>
  z
    .string()
    .regex(/^(off|[0-9]{1,5})$/, 'must be a port number, or off (or 0) for none')
    .refine((v) => v === 'off' || Number(v) <= 65535, 'must be a port number up to 65535')
    .transform((v) => (v === 'off' ? 0 : Number(v)))
    .default(fallback);

/** Every setting the service reads, validated once; the README lists them all. */
const settingsSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().min(1).default('0.0.0.0'),
  /**
   * Proxies in front of the API whose `X-Forwarded-For` entries are believed: `off` (the client IP
   * is the connection's address) or the number of hops, 1–10 (the entry that many from the right).
   */
  TRUST_PROXY: z
    .string()
    .regex(/^(off|[0-9]|10)$/, 'must be off or a number of proxy hops from 0 to 10')
    .transform((v) => (v === 'off' ? 0 : Number(v)))
    .default(0),
  DATABASE_URL: z.string().url().optional(),
  DATABASE_POOL_MAX: z.coerce.number().int().min(1).max(200).default(10),
  /** Server side: Postgres cancels a statement running longer (long jobs set their own with `SET LOCAL`). */
  DB_STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(100).max(3_600_000).default(DB_DEADLINE_DEFAULTS.statementMs),
  /**
   * Client side: a query without an answer this long fails and its connection is destroyed (a
   * blackholed socket, a paused server); at least DB_STATEMENT_TIMEOUT_MS + 500, so the server's cancel comes first.
   */
  DB_QUERY_TIMEOUT_MS: z.coerce.number().int().min(600).max(3_600_000).optional(),
  /** How long opening a Postgres connection (TCP, TLS, authentication) may take. */
  DB_CONNECT_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(DB_DEADLINE_DEFAULTS.connectMs),
  /** How long a query waits for a free pooled connection (knex's default is 60 s). */
  DB_POOL_ACQUIRE_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(DB_DEADLINE_DEFAULTS.acquireMs),
  /** Postgres ends a session idle inside a transaction this long (a paused process's locks are released). */
  DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(1000)
    .max(3_600_000)
    .default(DB_DEADLINE_DEFAULTS.idleInTransactionMs),
  /** Idle time before the first TCP keepalive probe on a Postgres connection (a dead peer is found in about this plus the kernel's probes). */
  DB_KEEPALIVE_INITIAL_DELAY_MS: z.coerce
    .number()
    .int()
    .min(1000)
    .max(600_000)
    .default(DB_DEADLINE_DEFAULTS.keepAliveMs),
  DATA_DIR: z.string().min(1).default('.data'),
  TEMPORAL_ADDRESS: z.string().min(1).optional(),
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  /** Deadline of each Temporal call the API makes (a start or signal), retries included; past it the request answers 503. */
  TEMPORAL_CALL_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(TEMPORAL_CALL_TIMEOUT_MS),
  TEMPORAL_TASK_QUEUE: z.string().min(1).default(defaultTaskQueue),
  /**
   * The Worker Deployment this process's workers belong to (docs/workflows.md, "Worker Deployment
   * Versioning"); unset: the task queue's name, so two installs that share a namespace never share one.
   */
  TEMPORAL_DEPLOYMENT_NAME: z
    .string()
    .regex(
      /^(?!__)[^.:\s"'\\]{1,255}$/,
      "must be 1-255 characters without '.', ':', spaces or quotes, not starting with __",
    )
    .optional(),
  /** This process's build in its deployment; unset: the release version in package.json. */
  TEMPORAL_BUILD_ID: z
    .string()
    .regex(BUILD_ID_PATTERN, 'must be 1-255 characters without spaces or quotes, not starting with __')
    .optional(),
  /** `off`: workers poll unversioned (a server without Worker Deployments); `on`: they declare their deployment version. */
  TEMPORAL_WORKER_VERSIONING: z.enum(['on', 'off']).default('on'),
  TEMPORAL_TLS_CERT_PATH: z.string().min(1).optional(),
  TEMPORAL_TLS_KEY_PATH: z.string().min(1).optional(),
  TEMPORAL_API_KEY: z.string().min(1).optional(),
  /**
   * A namespace without our custom search attributes: `register` them at start-up (where the server
   * allows it), or `check` only; either way a process that cannot have them refuses to start,
   * naming the command that creates them.
   */
  TEMPORAL_SEARCH_ATTRIBUTES: z.enum(['register', 'check']).default('register'),
  /** The Temporal Web UI, for the links `ops workflow show` prints. */
  TEMPORAL_UI_URL: z.string().url().default('http://localhost:8233'),
  PARTNER_ENVIRONMENT: z.enum(['sandbox', 'live']).default('sandbox'),
  PUBLIC_BASE_URL: z.string().url().optional(),
  WEBHOOK_ALLOWED_HOSTS: z
    .string()
    .default('')
    .transform((s) =>
      s
        .split(',')
        .map((h) => h.trim().toLowerCase())
        .filter(Boolean),
    ),
  /** 32 bytes (64 hex digits or base64) encrypting webhook signing secrets; unset: a logged development key. */
  WEBHOOK_SECRET_KEY: z
    .string()
    .regex(/^(?:[0-9a-fA-F]{64}|[A-Za-z0-9+/_-]{43}=?)$/, 'must be 32 bytes as 64 hex digits or base64')
    .optional(),
  /** A PEM file of extra certificate authorities webhook deliveries trust (a local receiver's self-signed cert). */
  WEBHOOK_EXTRA_CA_PATH: z.string().min(1).optional(),
  /** Calling codes OTP codes may be sent to (comma-separated, `+` optional); the test phone always may. */
  OTP_ALLOWED_COUNTRY_CODES: z
    .string()
    .transform((s) =>
      s
        .split(',')
        .map((c) => c.trim().replace(/^\+/, ''))
        .filter(Boolean),
    )
    .refine((codes) => codes.length > 0 && codes.every((c) => /^[1-9][0-9]{0,2}$/.test(c)), {
      message: 'must be calling codes such as 964 or 964,971',
    })
    .default(['964']),
  /** Webhook delivery activities this process runs at once (each sends up to 10 POSTs); 0: none (no webhook worker here). */
  WEBHOOK_ACTIVITY_SLOTS: z.coerce.number().int().min(0).max(1000).default(20),
  TEST_PHONE: z
    .string()
    .regex(/^\+[1-9][0-9]{6,14}$/)
    .default('+9647700000000'),
  PARTNER_BULK_RATE_LIMIT: z.coerce.number().int().min(1).default(60),
  PARTNER_BULK_RATE_WINDOW_SECONDS: z.coerce.number().int().min(1).default(600),
  CHECKOUT_RATE_LIMIT_PER_SECOND: z.coerce.number().int().min(1).default(100),
  BODY_LIMIT_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(100 * 1024),
  /** Outbox e-mail goes out through this SMTP server (`smtp://user:pass@host:587`, `smtps://…`); unset: kept in the outbox. */
  SMTP_URL: z
    .string()
    .url()
    .refine((u) => /^smtps?:$/.test(new URL(u).protocol), 'must be an smtp:// or smtps:// URL')
    .optional(),
  MAIL_FROM: z.string().min(1).default('Payments <no-reply@localhost>'),
  /** Outbox SMS goes out as `POST {"to", "body"}` to this URL (https; http only to a loopback host); unset: kept in the outbox. */
  SMS_HTTP_URL: z
    .string()
    .url()
    .refine((u) => {
      const url = new URL(u);
      return url.protocol === 'https:' || (url.protocol === 'http:' && LOOPBACK_HOST.test(url.hostname));
    }, 'must be an https URL (http only to localhost, 127.0.0.1 or [::1])')
    .optional(),
  /** Sent to SMS_HTTP_URL as `Authorization: Bearer …`; required with it. */
  SMS_HTTP_TOKEN: z.string().min(1).optional(),
  /** Where the metrics servers listen (`/metrics`, `/livez`, `/readyz`); loopback unless Prometheus scrapes from elsewhere. */
  METRICS_HOST: z.string().min(1).default('127.0.0.1'),
  /** The API's metrics port (never the public PORT); off or 0: none. */
  METRICS_PORT: metricsPort(9464),
  /** The worker's metrics port, which also serves the Temporal SDK's metrics; off or 0: none. */
  WORKER_METRICS_PORT: metricsPort(9465),
  /** Loopback port of the Temporal SDK's own exporter, which the worker's /metrics reads and appends; off or 0: none. */
  TEMPORAL_SDK_METRICS_PORT: metricsPort(9466),
  /** How often each process probes Postgres and Temporal (svc_dependency_up, svc_clock_skew_seconds, /readyz), each probe within its deadline. */
  DEPENDENCY_PROBE_INTERVAL_MS: z.coerce.number().int().min(200).max(60_000).default(5000),
  LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error', 'silent']).default('info'),
  /**
   * After SIGTERM or SIGINT, how long the API keeps serving (with `/readyz` failing and every answer
   * closing its connection) before it stops accepting: the time a load balancer needs to take it
   * out of rotation (a couple of failed health checks, then the change reaching every balancer).
   */
  SHUTDOWN_DRAIN_MS: z.coerce.number().int().min(0).max(600_000).default(5000),
  /**
   * After the drain, how long requests in flight (API) and activities in flight (worker) may take to
   * finish before what is left is closed; above the webhook POST timeout, so a delivery in flight is
   * always recorded.
   */
  SHUTDOWN_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .max(600_000)
    .refine((ms) => ms > DELIVERY_TIMEOUT_MS, `must exceed the webhook POST timeout (${DELIVERY_TIMEOUT_MS} ms)`)
    .default(15_000),
});

export type Settings = Omit<z.infer<typeof settingsSchema>, 'PUBLIC_BASE_URL' | 'DB_QUERY_TIMEOUT_MS'> & {
  PUBLIC_BASE_URL: string;
  DB_QUERY_TIMEOUT_MS: number;
};

/** Reads and validates settings from `env`; throws a readable error naming each bad variable. */
export function loadSettings(env: NodeJS.ProcessEnv = process.env): Settings {
  // An empty variable counts as unset, as shells and compose files often leave them.
  const parsed = settingsSchema.safeParse(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== '')));
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new Error(`Invalid settings:\n${lines.join('\n')}`);
  }
  const s = parsed.data;
  if (Boolean(s.SMS_HTTP_URL) !== Boolean(s.SMS_HTTP_TOKEN)) {
    throw new Error('Invalid settings:\n  SMS_HTTP_URL, SMS_HTTP_TOKEN: set both or neither');
  }
  if (!s.TEMPORAL_DEPLOYMENT_NAME && /[.:\s"'\\]/.test(s.TEMPORAL_TASK_QUEUE)) {
    throw new Error(
      "Invalid settings:\n  TEMPORAL_DEPLOYMENT_NAME: unset, and TEMPORAL_TASK_QUEUE cannot name the deployment ('.', ':', spaces or quotes); set it",
    );
  }
  const queryTimeoutMs = s.DB_QUERY_TIMEOUT_MS ?? s.DB_STATEMENT_TIMEOUT_MS + DB_DEADLINE_DEFAULTS.queryMarginMs;
  if (queryTimeoutMs < s.DB_STATEMENT_TIMEOUT_MS + 500) {
    throw new Error(
      'Invalid settings:\n  DB_QUERY_TIMEOUT_MS: must be at least DB_STATEMENT_TIMEOUT_MS + 500, so that Postgres cancels a statement before the client gives up on its connection',
    );
  }
  return {
    ...s,
    DB_QUERY_TIMEOUT_MS: queryTimeoutMs,
    PUBLIC_BASE_URL: s.PUBLIC_BASE_URL ?? `http://localhost:${s.PORT}`,
  };
}

/** The database URL, which every process except `npm start` requires. */
export function requireDatabaseUrl(settings: Settings): string {
  if (!settings.DATABASE_URL) {
    throw new Error('DATABASE_URL is not set (npm start sets it for you; production must set it).');
  }
  return settings.DATABASE_URL;
}
