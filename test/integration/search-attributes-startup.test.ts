import { Client, Connection } from '@temporalio/client';
import { freePort } from '../../scripts/processes';
import { captureLogs } from '../../src/lib/log';
import { registry } from '../../src/telemetry/metrics';
import { startHandoffRelay } from '../../src/temporal/handoff-relay';
import { recordHandoff } from '../../src/temporal/handoffs';
import { missingSearchAttributes } from '../../src/temporal/search-attribute-setup';
import { searchAttributeKeys } from '../../src/temporal/search-attributes';
import { buildMerchant } from '../helpers/factories';
import { startTestDevServer } from '../helpers/stack';
import { ownDatabase, startService, untilStatus } from '../helpers/services';

/**
 * A fresh Temporal namespace lacks our custom search attributes, and without them every session
 * start and webhook wake fails and retries forever while the processes look healthy. The API and
 * the worker register them where they may, and otherwise refuse to start naming the command; the
 * handoff relay says why Temporal refused; /readyz is not 200 while they are missing.
 */
jest.setTimeout(180_000);

let database: Awaited<ReturnType<typeof ownDatabase>>;
let temporal: Awaited<ReturnType<typeof startTestDevServer>>;
let connection: Connection;
beforeAll(async () => {
  [database, temporal] = await Promise.all([ownDatabase(), startTestDevServer({ searchAttributes: false })]);
  connection = await Connection.connect({ address: temporal.address });
}, 180_000);
afterAll(async () => {
  await connection?.close();
  await Promise.all([temporal?.stop(), database?.drop()]);
});

const env = () => ({
  DATABASE_URL: database.url,
  TEMPORAL_ADDRESS: temporal.address,
  TEMPORAL_NAMESPACE: temporal.namespace,
  HOST: '127.0.0.1',
  PORT: '0',
});
const names = searchAttributeKeys.map((k) => k.name);

describe.each(['api', 'worker'] as const)('npm run %s on a namespace without the search attributes', (entry) => {
  it('with TEMPORAL_SEARCH_ATTRIBUTES=check, exits at once naming the command that creates them', async () => {
    const service = startService(entry, {
      ...env(),
      TEMPORAL_SEARCH_ATTRIBUTES: 'check',
      METRICS_PORT: 'off',
      WORKER_METRICS_PORT: 'off',
    });
    expect(await service.exited).toBe(1);
    const command = `temporal operator search-attribute create --namespace ${temporal.namespace} ${names
      .map((n) => `--name ${n} --type Keyword`)
      .join(' ')}`;
    expect(service.output()).toContain(command);
    expect(await missingSearchAttributes(connection, temporal.namespace)).toEqual(names);
  });
});

describe('the handoff relay', () => {
  it('logs the gRPC status and message of the error Temporal answered, and counts it by status', async () => {
    const m = await buildMerchant(database.db);
    const session = `cs_test_${Date.now()}`;
    await recordHandoff(
      database.db,
      { merchantId: m.merchantId, mode: 'test' },
      {
        kind: 'session_start',
        session: {
          sessionId: session,
          expiresAtMs: Date.now() + 3_600_000,
          merchantId: m.merchantId,
          merchantName: 'Shop',
          mode: 'test',
          referenceId: 'order-1',
          amount: 1000,
          currency: 'IQD',
        },
      },
    );
    const lines: string[] = [];
    const restoreLogs = captureLogs({ write: (line: string) => void lines.push(line) }, 'warn');
    const relay = startHandoffRelay({
      db: database.db,
      temporal: new Client({ connection, namespace: temporal.namespace }),
      taskQueue: 'svc-main',
      pollEveryMs: 100,
    });
    try {
      const deadline = Date.now() + 20_000;
      while (!lines.some((l) => l.includes('handoff not delivered')) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      await relay.stop();
      restoreLogs();
    }
    const warning = lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'handoff not delivered; will retry');
    expect(warning).toMatchObject({
      workflow_id: session,
      error: {
        message: 'Failed to start Workflow',
        grpc_status: 'INVALID_ARGUMENT',
        grpc_message: expect.stringMatching(/search attribute/i),
      },
    });
    const row = await database.db('workflow_handoffs').where({ workflow_id: session }).first();
    expect(row.last_error).toContain(`INVALID_ARGUMENT: ${warning.error.grpc_message}`);
    const failures = await registry.getSingleMetric('svc_handoff_relay_failures_total')!.get();
    expect(failures.values.find((v) => v.labels.reason === 'INVALID_ARGUMENT')?.value).toBeGreaterThanOrEqual(1);
    await database.db('workflow_handoffs').where({ workflow_id: session }).delete();
  });
});

describe('with TEMPORAL_SEARCH_ATTRIBUTES=register (the default)', () => {
  it('the worker registers them and is ready; /readyz turns 503 naming one removed later', async () => {
    const [workerMetrics, sdkMetrics] = await Promise.all([freePort(), freePort()]);
    const worker = startService('worker', {
      ...env(),
      WORKER_METRICS_PORT: String(workerMetrics),
      TEMPORAL_SDK_METRICS_PORT: String(sdkMetrics),
    });
    try {
      const readyz = `http://127.0.0.1:${workerMetrics}/readyz`;
      await untilStatus(readyz, 200);
      expect(worker.output()).toContain('registered the missing search attributes');
      expect(await missingSearchAttributes(connection, temporal.namespace)).toEqual([]);

      await connection.operatorService.removeSearchAttributes({
        namespace: temporal.namespace,
        searchAttributes: ['Mode'],
      });
      const notReady = JSON.parse((await untilStatus(readyz, 503)).replace(/^503 /, ''));
      expect(notReady).toEqual({
        status: 'not_ready',
        checks: expect.arrayContaining([
          { name: 'search_attributes', ok: false, detail: `namespace ${temporal.namespace} lacks Mode` },
          { name: 'worker', ok: true },
        ]),
      });
    } finally {
      await worker.stop();
    }
  });
});
