import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as workflows from '../../workflows';
import { loadSettings } from '../../src/config';
import { deploymentVersionOf, queuesWithoutBuild, serviceTaskQueues, type Poller } from '../../src/temporal/deployment';
import { versioningBehaviors } from '../../src/temporal/versioning';
import { versioningBehaviors as unversioned } from '../../src/temporal/versioning-unversioned';
import { notFresh } from '../../src/worker/deployment';

const packageVersion = (
  JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string }
).version;

/** Each workflow type's versioning behaviour (docs/workflows.md, "Worker Deployment Versioning"). */
describe('versioning behaviours', () => {
  it('every registered workflow type declares the behaviour of the table, and the table names no other', () => {
    const declared = Object.fromEntries(
      Object.entries(workflows).map(([type, fn]) => [
        type,
        (fn as { workflowDefinitionOptions?: { versioningBehavior?: string } }).workflowDefinitionOptions
          ?.versioningBehavior,
      ]),
    );
    expect(declared).toEqual(versioningBehaviors);
  });

  it('refunds are PINNED; sessions, both delivery types and the janitor AUTO_UPGRADE', () => {
    expect(versioningBehaviors).toEqual({
      sessionWorkflow: 'AUTO_UPGRADE',
      endpointDeliveryWorkflow: 'AUTO_UPGRADE',
      deliveryWorkflow: 'AUTO_UPGRADE',
      janitorWorkflow: 'AUTO_UPGRADE',
      refundWorkflow: 'PINNED',
    });
  });

  it('the bundle of an unversioned worker declares none, for the same types', () => {
    expect(Object.keys(unversioned).sort()).toEqual(Object.keys(versioningBehaviors).sort());
    expect(Object.values(unversioned).every((b) => b === undefined)).toBe(true);
  });
});

describe('the deployment version a worker declares', () => {
  it('defaults to the task queue as the deployment and the release in package.json as the build', () => {
    expect(deploymentVersionOf(loadSettings({}))).toEqual({ deploymentName: 'svc-main', buildId: packageVersion });
    expect(deploymentVersionOf(loadSettings({ TEMPORAL_TASK_QUEUE: 'svc-staging' }))).toEqual({
      deploymentName: 'svc-staging',
      buildId: packageVersion,
    });
  });

  it('takes TEMPORAL_DEPLOYMENT_NAME and TEMPORAL_BUILD_ID; TEMPORAL_WORKER_VERSIONING=off declares none', () => {
    const s = loadSettings({ TEMPORAL_DEPLOYMENT_NAME: 'payments', TEMPORAL_BUILD_ID: '0.3.0-rc.1+abc' });
    expect(deploymentVersionOf(s)).toEqual({ deploymentName: 'payments', buildId: '0.3.0-rc.1+abc' });
    expect(deploymentVersionOf(loadSettings({ TEMPORAL_WORKER_VERSIONING: 'off' }))).toBeNull();
  });

  it('refuses names the server refuses, and a task queue that cannot name the deployment', () => {
    for (const name of ['svc.main', 'svc:main', '__svc', 'svc main']) {
      expect(() => loadSettings({ TEMPORAL_DEPLOYMENT_NAME: name })).toThrow(/TEMPORAL_DEPLOYMENT_NAME/);
    }
    for (const build of ['__build', '0.2 0', '0.2"0', 'x'.repeat(256)]) {
      expect(() => loadSettings({ TEMPORAL_BUILD_ID: build })).toThrow(/TEMPORAL_BUILD_ID/);
    }
    expect(() => loadSettings({ TEMPORAL_WORKER_VERSIONING: 'yes' })).toThrow(/TEMPORAL_WORKER_VERSIONING/);
    expect(() => loadSettings({ TEMPORAL_TASK_QUEUE: 'svc.main' })).toThrow(/TEMPORAL_DEPLOYMENT_NAME/);
    expect(
      deploymentVersionOf(loadSettings({ TEMPORAL_TASK_QUEUE: 'svc.main', TEMPORAL_DEPLOYMENT_NAME: 'svc' })),
    ).toMatchObject({ deploymentName: 'svc' });
  });
});

const poller = (over: Partial<Poller>): Poller => ({
  taskQueue: 'svc-main',
  type: 'workflow',
  identity: '1@host',
  lastSeenAt: new Date(),
  live: true,
  deploymentName: 'svc-main',
  buildId: '0.2.0',
  ...over,
});

describe('a worker promotes its build only on a brand-new deployment', () => {
  const fresh = { current: null, ramping: null, routingChangedAt: null, versions: [], conflictToken: new Uint8Array() };

  it('does when nothing is current and no unversioned worker polls', () => {
    expect(notFresh(null, [])).toBeNull();
    expect(notFresh(fresh, [poller({})])).toBeNull();
    // An unversioned worker gone for minutes (still listed by the server) serves nothing.
    expect(notFresh(fresh, [poller({ buildId: null, deploymentName: null, live: false })])).toBeNull();
  });

  it('does not while a build is current or ramping, or an unversioned worker polls', () => {
    expect(notFresh({ ...fresh, current: '0.1.9' }, [])).toBe('build 0.1.9 is current');
    expect(notFresh({ ...fresh, ramping: { buildId: '0.1.9', percentage: 5 } }, [])).toBe('build 0.1.9 is ramping');
    expect(notFresh(fresh, [poller({ buildId: null, deploymentName: null, identity: '7@old-host' })])).toBe(
      'unversioned workers poll the task queues (7@old-host)',
    );
  });
});

describe('the queues a build must poll before it is promoted', () => {
  it('are the main queue (workflows and activities) and the webhook activities; only live pollers of that build count', () => {
    const wanted = serviceTaskQueues('svc-main');
    expect(wanted).toEqual([
      { name: 'svc-main', type: 'workflow' },
      { name: 'svc-main', type: 'activity' },
      { name: 'svc-main-webhooks', type: 'activity' },
    ]);
    const pollers = [
      poller({}),
      poller({ type: 'activity', buildId: '0.1.0' }),
      poller({ taskQueue: 'svc-main-webhooks', type: 'activity', live: false }),
    ];
    expect(queuesWithoutBuild(pollers, wanted, 'svc-main', '0.2.0')).toEqual(wanted.slice(1));
    expect(queuesWithoutBuild(pollers, wanted, 'other', '0.2.0')).toEqual(wanted);
  });
});
