import { join, resolve } from 'node:path';
import { loadSettings } from '../src/config';
import { clusterHealth, readClusterState, runningCluster, startCluster, stopCluster } from './cluster/cluster';
import { clusterDatabaseFromUrl } from './cluster/config';
import { liveMembers } from './cluster/schema';
import { NAMESPACE_RETENTION, TEMPORAL_SERVER_VERSION } from './cluster/settings';
import { repoRoot } from './processes';
import { findTemporalCli } from './toolchain';

/**
 * `npm run cluster [start|stop|status]`: a self-hosted Temporal cluster built from its Go module
 * (docs/cluster.md): a frontend, two history, two matching and a worker service, one process each,
 * on the Postgres server of DATABASE_URL. `start` (the default) returns once it serves, leaving it
 * running; `stop` stops it; `status` prints its health and membership.
 */

/** A first start on a loaded two-core machine: 512 shards to acquire, six processes. */
const STARTUP_TIMEOUT_MS = 240_000;

const say = (line: string) => process.stdout.write(`${line}\n`);

async function main(): Promise<void> {
  const command = process.argv[2] ?? 'start';
  const settings = loadSettings(process.env);
  const dir = join(resolve(repoRoot, settings.DATA_DIR), 'cluster');
  if (command === 'stop') {
    const stopped = await stopCluster(dir, say);
    say(stopped.length ? `Stopped ${stopped.join(', ')}.` : 'No cluster was running.');
    return;
  }
  if (command !== 'start' && command !== 'status') throw new Error(`unknown command ${command}: start, stop or status`);
  if (!settings.DATABASE_URL) {
    throw new Error(
      'Set DATABASE_URL to a Postgres server for the Temporal databases (e.g. postgres://postgres@127.0.0.1:5432/postgres).',
    );
  }
  const cli = findTemporalCli();
  if (command === 'status') {
    const state = runningCluster(dir);
    if (!state) {
      say(
        readClusterState(dir)
          ? 'The cluster recorded in .data/cluster is not fully running (`npm run cluster -- stop`, then start).'
          : 'No cluster is running.',
      );
      process.exitCode = 1;
      return;
    }
    say(await clusterHealth(cli, state.address));
    printMembers(
      await liveMembers(
        clusterDatabaseFromUrl(settings.DATABASE_URL, {
          database: state.database.database,
          visibilityDatabase: state.database.visibilityDatabase,
        }),
      ),
    );
    return;
  }
  const started = Date.now();
  const cluster = await startCluster({
    dir,
    databaseUrl: settings.DATABASE_URL,
    namespace: settings.TEMPORAL_NAMESPACE,
    retention: NAMESPACE_RETENTION,
    temporalCli: cli,
    timeoutMs: STARTUP_TIMEOUT_MS,
    say,
  });
  const { state } = cluster;
  say(
    cluster.started
      ? `Temporal ${TEMPORAL_SERVER_VERSION} cluster started in ${Math.round((Date.now() - started) / 1000)} s (build ${cluster.buildSeconds} s).`
      : 'A cluster is running already: reusing it.',
  );
  say(
    `History shards: ${state.historyShards}; databases ${state.database.database} and ${state.database.visibilityDatabase} on ${state.database.host}:${state.database.port}.`,
  );
  say('process      pid      gRPC   membership  metrics');
  for (const p of state.processes) {
    say(
      `${p.name.padEnd(12)} ${String(p.pid).padEnd(8)} ${String(p.ports.grpc).padEnd(6)} ${String(p.ports.membership).padEnd(11)} http://127.0.0.1:${p.ports.metrics}/metrics`,
    );
  }
  say(await clusterHealth(cli, state.address));
  printMembers(cluster.members);
  say(
    `Use it: TEMPORAL_ADDRESS=${state.address} (namespace ${state.namespace}), or TEMPORAL_MODE=cluster npm start. Stop: npm run cluster -- stop.`,
  );
}

function printMembers(members: { role: string; address: string }[]): void {
  const byRole = new Map<string, string[]>();
  for (const m of members) byRole.set(m.role, [...(byRole.get(m.role) ?? []), m.address]);
  say('Membership:');
  for (const [role, addresses] of byRole) say(`  ${role.padEnd(9)} ${addresses.length}: ${addresses.join(', ')}`);
}

main().catch((err: unknown) => {
  process.stderr.write(`npm run cluster failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
