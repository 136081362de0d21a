import { readFileSync } from 'node:fs';
import { Client, Connection, ConnectionOptions } from '@temporalio/client';
import { temporalClientInterceptors } from '../telemetry/temporal';
import type { Settings } from '../config';
import { log } from '../lib/log';
import { deadlineInterceptor, TEMPORAL_CALL_TIMEOUT_MS, TEMPORAL_KEEPALIVE } from './deadlines';
import { ensureSearchAttributes, type OperatorConnection } from './search-attribute-setup';

/** Connection options for TEMPORAL_ADDRESS, with mTLS or an API key for Temporal Cloud. */
export function temporalConnectionOptions(
  settings: Settings,
): Pick<ConnectionOptions, 'address' | 'tls'> & { apiKey?: string } {
  const address = settings.TEMPORAL_ADDRESS ?? '127.0.0.1:7233';
  const mtls =
    settings.TEMPORAL_TLS_CERT_PATH && settings.TEMPORAL_TLS_KEY_PATH
      ? {
          tls: {
            clientCertPair: {
              crt: readFileSync(settings.TEMPORAL_TLS_CERT_PATH),
              key: readFileSync(settings.TEMPORAL_TLS_KEY_PATH),
            },
          },
        }
      : {};
  const apiKey = settings.TEMPORAL_API_KEY ? { apiKey: settings.TEMPORAL_API_KEY, tls: true } : {};
  return { address, ...mtls, ...apiKey };
}

/**
 * The options of the API's (and the CLI's) Temporal connection: TEMPORAL_ADDRESS and its
 * credentials, gRPC keepalive, and a deadline of TEMPORAL_CALL_TIMEOUT_MS on every call.
 */
export function apiConnectionOptions(settings: Settings): ConnectionOptions {
  return {
    ...temporalConnectionOptions(settings),
    channelArgs: TEMPORAL_KEEPALIVE,
    interceptors: [deadlineInterceptor(settings.TEMPORAL_CALL_TIMEOUT_MS)],
  };
}

/** A Temporal client on `connection` for the configured namespace (carrying the active trace when tracing is on). */
export function temporalClientOn(connection: Connection, settings: Settings): Client {
  const client = new Client({
    connection,
    namespace: settings.TEMPORAL_NAMESPACE,
    interceptors: temporalClientInterceptors(),
  });
  callTimeouts.set(client, settings.TEMPORAL_CALL_TIMEOUT_MS);
  return client;
}

const callTimeouts = new WeakMap<Client, number>();

/**
 * The deadline of one call on `client` (TEMPORAL_CALL_TIMEOUT_MS of the settings it was made
 * with), for a request that makes several calls and must answer within one of them.
 */
export function callTimeoutOf(client: Client): number {
  return callTimeouts.get(client) ?? TEMPORAL_CALL_TIMEOUT_MS;
}

/** A Temporal client for the configured namespace, every call under its deadline (`apiConnectionOptions`). */
export async function connectTemporal(settings: Settings): Promise<Client> {
  return temporalClientOn(await Connection.connect(apiConnectionOptions(settings)), settings);
}

/** `ensureSearchAttributes` as TEMPORAL_SEARCH_ATTRIBUTES says, logging what it registered. */
export async function requireSearchAttributes(connection: OperatorConnection, settings: Settings): Promise<void> {
  const namespace = settings.TEMPORAL_NAMESPACE;
  const { registered, unchecked } = await ensureSearchAttributes(
    connection,
    namespace,
    settings.TEMPORAL_SEARCH_ATTRIBUTES === 'register',
  );
  if (unchecked) {
    log.warn('cannot list the namespace search attributes (no operator rights); not checked', { namespace });
  }
  if (registered.length > 0) log.info('registered the missing search attributes', { namespace, registered });
}
