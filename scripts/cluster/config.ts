import { stringify } from 'yaml';
import { DYNAMIC_CONFIG_FILE, HISTORY_SHARDS, type TemporalService } from './settings';

/** Loopback only: the frontend has no authentication, and the internal services never leave the host. */
export const CLUSTER_HOST = '127.0.0.1';

/** Where Temporal's persistence lives: a Postgres server and the two databases on it. */
export interface ClusterDatabase {
  host: string;
  port: number;
  user: string;
  password: string;
  database: string;
  visibilityDatabase: string;
}

/** The ports of one process; the frontend's also has its HTTP API. */
export interface ProcessPorts {
  grpc: number;
  membership: number;
  metrics: number;
  http?: number;
}

/** One process's ports for each service: what every process's config lists for the services it does not run. */
export type ServicePorts = Record<TemporalService, ProcessPorts>;

/** `postgres://user:pw@host:port/db` to the server part of a ClusterDatabase. */
export function clusterDatabaseFromUrl(
  databaseUrl: string,
  names: { database: string; visibilityDatabase: string },
): ClusterDatabase {
  const url = new URL(databaseUrl);
  return {
    host: url.hostname || CLUSTER_HOST,
    port: Number(url.port || 5432),
    user: decodeURIComponent(url.username || 'postgres'),
    password: decodeURIComponent(url.password),
    ...names,
  };
}

function sqlStore(db: ClusterDatabase, databaseName: string, maxConns: number) {
  return {
    sql: {
      pluginName: 'postgres12',
      databaseName,
      connectAddr: `${db.host}:${db.port}`,
      connectProtocol: 'tcp',
      user: db.user,
      password: db.password,
      maxConns,
      maxIdleConns: maxConns,
      maxConnLifetime: '1h',
    },
  };
}

/**
 * The server config of one process running `service`: Postgres persistence and SQL visibility,
 * HISTORY_SHARDS shards (a bench may ask for fewer), its own gRPC, membership and Prometheus ports on loopback, and the
 * dynamic config file docker-compose.yml mounts too. Connection pools are per process: 10 + 5
 * for each of six processes stays under a shared Postgres's default 100 connections.
 */
export function serverConfig(
  service: TemporalService,
  ports: ProcessPorts,
  peers: ServicePorts,
  db: ClusterDatabase,
  historyShards: number = HISTORY_SHARDS,
): Record<string, unknown> {
  const rpc = (p: ProcessPorts) => ({
    grpcPort: p.grpc,
    membershipPort: p.membership,
    bindOnIP: CLUSTER_HOST,
    ...(p.http === undefined ? {} : { httpPort: p.http }),
  });
  // Every service is listed (the membership monitor tracks the rings of those named), with this
  // process's own ports for the one it runs; the others' addresses come from membership.
  const services = Object.fromEntries(
    (Object.keys(peers) as TemporalService[]).map((s) => [s, { rpc: rpc(s === service ? ports : peers[s]) }]),
  );
  const frontend = peers.frontend;
  return {
    log: { stdout: true, level: 'warn' },
    persistence: {
      numHistoryShards: historyShards,
      defaultStore: 'default',
      visibilityStore: 'visibility',
      datastores: {
        default: sqlStore(db, db.database, 10),
        visibility: sqlStore(db, db.visibilityDatabase, 5),
      },
    },
    global: {
      membership: { maxJoinDuration: '30s', broadcastAddress: CLUSTER_HOST },
      metrics: { prometheus: { timerType: 'histogram', listenAddress: `${CLUSTER_HOST}:${ports.metrics}` } },
    },
    services,
    clusterMetadata: {
      enableGlobalNamespace: false,
      failoverVersionIncrement: 10,
      masterClusterName: 'active',
      currentClusterName: 'active',
      clusterInformation: {
        active: {
          enabled: true,
          initialFailoverVersion: 1,
          rpcName: 'frontend',
          rpcAddress: `${CLUSTER_HOST}:${frontend.grpc}`,
          httpAddress: `${CLUSTER_HOST}:${frontend.http!}`,
        },
      },
    },
    dcRedirectionPolicy: { policy: 'noop' },
    dynamicConfigClient: { filepath: DYNAMIC_CONFIG_FILE, pollInterval: '10s' },
  };
}

/** The config as the YAML file the server reads (`--config-file`), with a header saying who wrote it. */
export const serverConfigYaml = (config: Record<string, unknown>): string =>
  `# Written by \`npm run cluster\` (scripts/cluster/config.ts) at each start; edit that, not this.\n${stringify(config)}`;
