/** Runtime: what the webhook services and the send take from settings (secret key, resolver, allowed hosts, extra CAs). */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Settings } from '../config';
import type { Db } from '../db/knex';
import { log } from '../lib/log';
import { parseSecretKey, secretCipher, SecretCipher } from './secret-crypto';
import { Resolver, systemResolver } from './url-safety';

/** What the webhook services and the delivery activity take from the outside world. */
export interface WebhookRuntime {
  /** Hosts allowed as targets although they are local or resolve to non-public addresses (dev and tests). */
  allowedHosts: readonly string[];
  /** Encrypts and decrypts signing secrets at rest. */
  cipher: SecretCipher;
  /** Host name resolution, used for the safety check and for the connection (one lookup, one address). */
  resolve: Resolver;
  /** Extra certificate authorities (PEM) trusted beside Node's roots, never instead of verification. */
  extraCa: string[];
  /**
   * A test seam, unset in production: runs after each POST and before its row is updated; a
   * throw there is a worker dying between the POST and the row update.
   */
  afterSend?: (eventIds: string[]) => void | Promise<void>;
}

/** A well-known key, used only when WEBHOOK_SECRET_KEY is unset (development); never for real secrets. */
const DEVELOPMENT_KEY = createHash('sha256').update('svc-payments development webhook secret key').digest();
let warned = false;

type WebhookSettings = Pick<Settings, 'WEBHOOK_ALLOWED_HOSTS' | 'WEBHOOK_SECRET_KEY' | 'WEBHOOK_EXTRA_CA_PATH'>;

/**
 * Live use needs a secret key of its own: the development key is in the repository, so secrets it
 * encrypts are as good as public. Throws when WEBHOOK_SECRET_KEY is unset and the process serves
 * live Partner keys (PARTNER_ENVIRONMENT=live) or any live Checkout key is in use (one indexed
 * query). The API and the worker run it before they start; `checkout-key create --mode live` too.
 */
export async function requireSecretKeyForLive(
  settings: Pick<Settings, 'WEBHOOK_SECRET_KEY' | 'PARTNER_ENVIRONMENT'>,
  db: Db,
): Promise<void> {
  if (settings.WEBHOOK_SECRET_KEY) return;
  const refuse = (why: string) =>
    new Error(`WEBHOOK_SECRET_KEY must be set (openssl rand -hex 32) when ${why}: the development key is public.`);
  if (settings.PARTNER_ENVIRONMENT === 'live') throw refuse('PARTNER_ENVIRONMENT=live');
  const live = await db('checkout_keys')
    .where({ mode: 'live' })
    // A rolled key works until its revoked_at.
    .where((q) => q.whereNull('revoked_at').orWhere('revoked_at', '>', db.fn.now()))
    .first('id');
  if (live) throw refuse('a live Checkout key is in use');
}

/** The runtime from settings; `overrides` replace parts of it (tests inject a resolver). */
export function webhookRuntime(settings: WebhookSettings, overrides: Partial<WebhookRuntime> = {}): WebhookRuntime {
  let key = settings.WEBHOOK_SECRET_KEY ? parseSecretKey(settings.WEBHOOK_SECRET_KEY) : null;
  if (settings.WEBHOOK_SECRET_KEY && !key) throw new Error('WEBHOOK_SECRET_KEY is not a 32-byte key');
  if (!key) {
    if (!warned) {
      warned = true;
      log.warn(
        'WEBHOOK_SECRET_KEY is not set: webhook signing secrets are encrypted with the public development key; ' +
          'set a random 32-byte key (openssl rand -hex 32) anywhere but a development machine',
      );
    }
    key = DEVELOPMENT_KEY;
  }
  return {
    allowedHosts: settings.WEBHOOK_ALLOWED_HOSTS,
    cipher: secretCipher(key),
    resolve: systemResolver,
    extraCa: settings.WEBHOOK_EXTRA_CA_PATH ? [readFileSync(settings.WEBHOOK_EXTRA_CA_PATH, 'utf8')] : [],
    ...overrides,
  };
}
