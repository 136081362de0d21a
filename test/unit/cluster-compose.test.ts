import { readFileSync } from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { parse } from 'yaml';
import { serverConfig } from '../../scripts/cluster/config';
import {
  CLUSTER_PROCESSES,
  DYNAMIC_CONFIG_FILE,
  HISTORY_SHARDS,
  NAMESPACE_RETENTION,
  PLANNED_TRANSITIONS_PER_SECOND,
  TEMPORAL_SERVER_VERSION,
  TRANSITIONS_PER_SHARD_BUDGET,
} from '../../scripts/cluster/settings';
import { repoRoot } from '../../scripts/processes';
import { searchAttributeKeys } from '../../src/temporal/search-attributes';

/**
 * docker-compose.yml runs what `npm run cluster` runs: the same Temporal release (one source,
 * scripts/cluster/settings.ts), the same shards, pools, dynamic config and services, and the same
 * namespace set-up. Nothing here can run compose (no container engine): this keeps the file true.
 */
interface Service {
  image?: string;
  environment?: Record<string, string>;
  volumes?: string[];
  command?: string[];
  deploy?: { replicas?: number };
}
const compose = parse(readFileSync(join(repoRoot, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, Service>;
};
const services = Object.entries(compose.services);
const temporalServers = services.filter(([, s]) => s.image?.startsWith('temporalio/server:'));

describe('docker-compose.yml and npm run cluster', () => {
  it('runs the pinned server release in every Temporal server and admin-tools image', () => {
    const images = services.map(([, s]) => s.image ?? '').filter((i) => /^temporalio\/(server|admin-tools):/.test(i));
    expect(images.length).toBeGreaterThanOrEqual(6);
    for (const image of images) expect(image.split(':')[1]).toBe(TEMPORAL_SERVER_VERSION);
    expect(TEMPORAL_SERVER_VERSION).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it('runs one service per container with the script’s replica counts', () => {
    const counts = new Map<string, number>();
    for (const [, s] of temporalServers) {
      const service = s.environment?.TEMPORAL_SERVICES ?? '';
      counts.set(service, (counts.get(service) ?? 0) + (s.deploy?.replicas ?? 1));
    }
    const expected = new Map<string, number>();
    for (const p of CLUSTER_PROCESSES) expected.set(p.service, (expected.get(p.service) ?? 0) + 1);
    expect(Object.fromEntries(counts)).toEqual(Object.fromEntries(expected));
  });

  it('uses the same shard count, connection pools and dynamic config file', () => {
    const ports = { grpc: 1, membership: 2, metrics: 3 };
    const config = serverConfig(
      'history',
      ports,
      { frontend: { ...ports, http: 4 }, history: ports, matching: ports, worker: ports },
      {
        host: 'h',
        port: 5432,
        user: 'u',
        password: '',
        database: 'temporal',
        visibilityDatabase: 'temporal_visibility',
      },
    ) as {
      persistence: {
        numHistoryShards: number;
        datastores: Record<string, { sql: { maxConns: number; databaseName: string } }>;
      };
    };
    const { datastores } = config.persistence;
    expect(config.persistence.numHistoryShards).toBe(HISTORY_SHARDS);
    const mountedDir = relative(repoRoot, dirname(DYNAMIC_CONFIG_FILE));
    for (const [name, s] of temporalServers) {
      const env = s.environment ?? {};
      expect([name, Number(env.NUM_HISTORY_SHARDS)]).toEqual([name, HISTORY_SHARDS]);
      expect(Number(env.SQL_MAX_CONNS)).toBe(datastores.default.sql.maxConns);
      expect(Number(env.SQL_VIS_MAX_CONNS)).toBe(datastores.visibility.sql.maxConns);
      expect(env.DYNAMIC_CONFIG_FILE_PATH?.endsWith(`/${basename(DYNAMIC_CONFIG_FILE)}`)).toBe(true);
      expect(s.volumes).toContain(`./${mountedDir}:${dirname(env.DYNAMIC_CONFIG_FILE_PATH!)}:ro`);
    }
  });

  it('creates the namespace with the script’s retention and all our search attributes', () => {
    const script = compose.services['temporal-namespace'].command!.join('\n');
    expect(script).toContain(`--retention ${NAMESPACE_RETENTION}`);
    const named = [...script.matchAll(/--name (\w+)/g)].map((m) => m[1]);
    expect(named.sort()).toEqual(searchAttributeKeys.map((k) => k.name).sort());
  });

  it('sizes the shards for docs/capacity.md’s 100× line at the per-shard budget, a power of two', () => {
    expect(Math.log2(HISTORY_SHARDS) % 1).toBe(0);
    expect(HISTORY_SHARDS * TRANSITIONS_PER_SHARD_BUDGET).toBeGreaterThanOrEqual(PLANNED_TRANSITIONS_PER_SECOND);
    expect((HISTORY_SHARDS / 2) * TRANSITIONS_PER_SHARD_BUDGET).toBeLessThan(PLANNED_TRANSITIONS_PER_SECOND);
  });
});
