import { closeSync, mkdirSync, openSync, readFileSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { Connection } from '@temporalio/client';
import { devServerSearchAttributeFlags } from '../src/temporal/search-attribute-setup';
import { Child, freePort, startChild, waitFor } from './processes';

export interface TemporalDevServerOptions {
  /** The `temporal` CLI binary. */
  cli: string;
  /** The frontend's and the Web UI's ports; omitted: free ones, found again if the server loses one to another process. */
  port?: number;
  uiPort?: number;
  /** SQLite file that keeps workflows across restarts. */
  dbFile: string;
  namespace: string;
  /** Where the server's output goes (it is noisy on shutdown). */
  logFile: string;
  timeoutMs: number;
  /** More `start-dev` flags (a benchmark's `--sqlite-pragma …`). */
  extraArgs?: readonly string[];
  /** Create our custom search attributes at start (default); false: a namespace without them, as a fresh cluster has. */
  searchAttributes?: boolean;
}

export interface TemporalDevServer {
  readonly child: Child;
  /** host:port of the frontend, for TEMPORAL_ADDRESS. */
  readonly address: string;
  readonly uiUrl: string;
}

const HOST = '127.0.0.1';

/**
 * SQLite in write-ahead-log mode, synced at checkpoints rather than at every commit: a workflow
 * start costs a few milliseconds instead of an fsync of the whole journal. What it trades: the
 * last transactions may be lost on a power loss or an OS crash (never on a crash of the server
 * process itself), acceptable for a development server and a benchmark, not for production.
 */
const TUNING = ['--sqlite-pragma', 'journal_mode=wal', '--sqlite-pragma', 'synchronous=normal'];

/**
 * Worker Deployment drainage within seconds instead of minutes: the server rechecks a draining
 * build's pinned runs every 5 s (default 3 min) and believes visibility 10 s after the build stopped
 * being current (default 3 min). `ops release status` decides on its own count either way; this
 * makes the server's `server_drainage` agree with it promptly (docs/workflows.md).
 */
export const DRAINAGE_FLAGS = [
  '--dynamic-config-value',
  'matching.wv.VersionDrainageStatusRefreshInterval="5s"',
  '--dynamic-config-value',
  'matching.wv.VersionDrainageStatusVisibilityGracePeriod="10s"',
];

/** Starts attempts at most, when the ports are picked here (a free port can be taken before the server binds it). */
const PORT_TRIES = 3;

/**
 * Starts `temporal server start-dev` on loopback and waits until the namespace and the Web UI
 * answer. With no ports given it picks free ones, and picks again when the server exits with
 * "address already in use" (a parallel test's or bench's server took one first), up to 3 times.
 */
export async function startTemporalDevServer(options: TemporalDevServerOptions): Promise<TemporalDevServer> {
  const pinned = options.port !== undefined && options.uiPort !== undefined;
  for (let tries = 1; ; tries++) {
    const logFrom = logSize(options.logFile);
    try {
      return await startOnce({
        ...options,
        port: options.port ?? (await freePort()),
        uiPort: options.uiPort ?? (await freePort()),
      });
    } catch (err) {
      const lostPort = readFileSync(options.logFile, 'utf8').slice(logFrom).includes('address already in use');
      if (pinned || !lostPort || tries >= PORT_TRIES) throw err;
    }
  }
}

const logSize = (file: string) => {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
};

async function startOnce(
  options: TemporalDevServerOptions & { port: number; uiPort: number },
): Promise<TemporalDevServer> {
  mkdirSync(dirname(options.dbFile), { recursive: true });
  const log = openSync(options.logFile, 'a');
  const flags = {
    '--ip': HOST,
    '--port': String(options.port),
    '--ui-port': String(options.uiPort),
    '--db-filename': options.dbFile,
    '--namespace': options.namespace,
    '--log-level': 'warn',
  };
  const args = [
    'server',
    'start-dev',
    ...Object.entries(flags).flat(),
    ...TUNING,
    ...DRAINAGE_FLAGS,
    ...(options.searchAttributes === false ? [] : devServerSearchAttributeFlags()),
    ...(options.extraArgs ?? []),
  ];
  const child = startChild(
    'Temporal dev server',
    options.cli,
    args,
    { stdio: ['ignore', log, log] },
    { logFile: options.logFile },
  );
  closeSync(log);

  const address = `${HOST}:${options.port}`;
  const uiUrl = `http://localhost:${options.uiPort}`;
  const wait = { timeoutMs: options.timeoutMs, watched: [child], intervalMs: 500 };
  await waitFor(`Temporal frontend at ${address}`, () => namespaceAnswers(address, options.namespace), wait);
  await waitFor(`Temporal Web UI at ${uiUrl}`, () => httpAnswers(`http://${HOST}:${options.uiPort}/`), wait);
  return { child, address, uiUrl };
}

/** True when the frontend at `address` describes `namespace`. */
async function namespaceAnswers(address: string, namespace: string): Promise<boolean> {
  const connection = await Connection.connect({ address, connectTimeout: '2s' });
  try {
    await connection.workflowService.describeNamespace({ namespace });
    return true;
  } finally {
    await connection.close();
  }
}

/** True when `url` answers a GET without a server error. */
async function httpAnswers(url: string): Promise<boolean> {
  const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
  return res.status < 500;
}
