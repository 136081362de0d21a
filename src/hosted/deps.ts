import type { Db } from '../db/knex';
import type { HostedKeys } from './hosted-keys';
import type { PublicClient } from './public-client';

/** What the hosted pages' handlers use. */
export interface HostedDeps {
  /** Only for "whose page is this" (see owners.ts); everything else goes through `api`. */
  db: Db;
  /** The public routes (`/v1/public/*`). */
  api: PublicClient;
  keys: HostedKeys;
  testPhone: string;
  secureCookies: boolean;
  /** The origin of PUBLIC_BASE_URL, where shoppers open the pages. */
  publicOrigin: string;
}

/** What an attempt id in a hosted page address can look like. */
export const ATTEMPT_ID = /^pa_[A-Za-z0-9_]{1,96}$/;
