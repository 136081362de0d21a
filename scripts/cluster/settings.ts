import { homedir } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from '../processes';

/**
 * The one place the self-hosted Temporal server's release is written. `npm run cluster` builds it
 * from its Go module; docker-compose.yml runs the images of the same release (a unit test holds
 * them together). 1.32: the schema and the APIs of the CLI's dev server (temporal 1.9.1 embeds
 * Server 1.32.0) that the SDK and the tests run on; .1 is the newest 1.32 patch that builds on the
 * machine's Go 1.26.8 (1.32.2 asks for Go 1.26.10).
 */
export const TEMPORAL_SERVER_VERSION = '1.32.1';

/**
 * History shards, fixed when a cluster's database is created. docs/capacity.md's model: at the
 * 100× line about 10,000 state transitions a second; budgeting 25 a second per shard (to be
 * replaced by the per-shard figure measured on this cluster) gives 400, rounded up to a power of
 * two as Temporal advises.
 */
export const PLANNED_TRANSITIONS_PER_SECOND = 10_000;
export const TRANSITIONS_PER_SHARD_BUDGET = 25;
export const HISTORY_SHARDS = 2 ** Math.ceil(Math.log2(PLANNED_TRANSITIONS_PER_SECOND / TRANSITIONS_PER_SHARD_BUDGET));

/** Closed workflows kept 3 days: long enough to look into last weekend's incident, short enough for a laptop. */
export const NAMESPACE_RETENTION = '72h';

/** Dynamic config shared with docker-compose.yml (mounted there at /etc/temporal/config/dynamicconfig/). */
export const DYNAMIC_CONFIG_FILE = join(repoRoot, 'ops', 'temporal', 'dynamicconfig.yaml');

/** The Temporal databases on the given Postgres server, as docker-compose.yml names them. */
export const TEMPORAL_DATABASE = 'temporal';
export const VISIBILITY_DATABASE = 'temporal_visibility';

/** The services, one process each: a frontend, two history, two matching and a worker service. */
export type TemporalService = 'frontend' | 'history' | 'matching' | 'worker';
export const CLUSTER_PROCESSES: readonly { name: string; service: TemporalService }[] = [
  { name: 'history-1', service: 'history' },
  { name: 'history-2', service: 'history' },
  { name: 'matching-1', service: 'matching' },
  { name: 'matching-2', service: 'matching' },
  { name: 'frontend', service: 'frontend' },
  { name: 'worker', service: 'worker' },
];

/** Where the build goes: the binaries, and the Go module and build caches a second run reuses. */
export const toolsDir = join(repoRoot, '.tools');
export const serverDir = join(toolsDir, `temporal-server-${TEMPORAL_SERVER_VERSION}`);
export const serverBinary = join(serverDir, 'bin', 'server');
export const sqlToolBinary = join(serverDir, 'bin', 'sql');
export const goCacheDirs = { GOMODCACHE: join(toolsDir, 'go', 'mod'), GOCACHE: join(toolsDir, 'go', 'cache') };

/**
 * The build kept outside the checkout, for a clean clone (CI): after a build the two binaries are
 * copied here, and a checkout without them in .tools/ takes them from here instead of building.
 * TEMPORAL_SERVER_CACHE, else $XDG_CACHE_HOME (or ~/.cache)/svc-payments-marketplace.
 */
export function machineBuildDir(env: NodeJS.ProcessEnv = process.env): string {
  const root =
    env.TEMPORAL_SERVER_CACHE || join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'svc-payments-marketplace');
  return join(root, `temporal-server-${TEMPORAL_SERVER_VERSION}`, 'bin');
}
