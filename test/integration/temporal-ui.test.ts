import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { WorkflowExecutionInfo } from '@temporalio/client';
import { run } from '../../src/cli/run';
import { randomString } from '../../src/lib/ids';
import { merchantIdKey, sessionStatusKey } from '../../src/temporal/search-attributes';
import { launchBrowser } from '../e2e/browser';
import { createSession, payableBody, shopper, until } from '../helpers/checkout-payments';
import { buildMerchant } from '../helpers/factories';
import { call } from '../helpers/http';
import { HttpsReceiver, RECEIVER_HOST, startHttpsReceiver } from '../helpers/https-receiver';
import { startStack, Stack } from '../helpers/stack';

/**
 * What an operator sees in the Temporal UI, on a real `temporal server start-dev` (the
 * time-skipping server has no visibility queries and no UI): sessions found by the business ids
 * they know, their status kept current as a search attribute (a session's, a failing
 * endpoint's), `ops workflow show`, and the
 * screenshots the README shows (`UPDATE_DOC_SCREENSHOTS=1` writes them into docs/screenshots).
 */
let stack: Stack;
let receiver: HttpsReceiver;
beforeAll(async () => {
  receiver = await startHttpsReceiver();
  receiver.respond = () => ({ status: 503 }); // every endpoint here is down
  stack = await startStack(
    { WEBHOOK_ALLOWED_HOSTS: RECEIVER_HOST, WEBHOOK_EXTRA_CA_PATH: receiver.caPath },
    { temporal: 'dev-server', webUi: true },
  );
}, 180_000);
afterAll(async () => {
  await stack.stop();
  await receiver.close();
});

/** The workflows a visibility query finds (the dev server indexes within a second or so). */
async function find(query: string): Promise<WorkflowExecutionInfo[]> {
  const found: WorkflowExecutionInfo[] = [];
  for await (const info of stack.env.client.workflow.list({ query })) found.push(info);
  return found;
}

async function untilFound(query: string, workflowId: string): Promise<WorkflowExecutionInfo> {
  let hit: WorkflowExecutionInfo | undefined;
  await until(async () => {
    hit = (await find(query)).find((w) => w.workflowId === workflowId);
    return hit !== undefined;
  }, `${workflowId} to match ${query}`);
  return hit!;
}

async function payableSession() {
  const m = await buildMerchant(stack.db);
  const s = await createSession(stack, m.secretKey, payableBody());
  return { m, s, pub: shopper(stack, m.publishableKey) };
}

it('finds a session by ReferenceId and MerchantId, with SessionStatus following it from open to processing to completed', async () => {
  const { m, s, pub } = await payableSession();
  const byIds = `ReferenceId = "${s.reference_id}" AND MerchantId = "${m.merchantId}"`;
  const found = await untilFound(byIds, s.id);
  expect(found.typedSearchAttributes.get(sessionStatusKey)).toBe('open');
  expect(await find(`ReferenceId = "${s.reference_id}" AND MerchantId = "m_not_this_one"`)).toEqual([]);

  const attempt = await pub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test' } });
  expect(attempt.status).toBe(201);
  await untilFound(`${byIds} AND SessionStatus = "processing"`, s.id);

  await pub('POST', `/test-gateway/${attempt.body.attempt_id}/decide`, { body: { decision: 'succeeded' } });
  const completed = await untilFound(`${byIds} AND SessionStatus = "completed"`, s.id);
  expect(completed.status.name).toBe('COMPLETED');
});

it('ops workflow show prints the UI link, the summary and what a session waits for now', async () => {
  const { s } = await payableSession();
  await untilFound(`ReferenceId = "${s.reference_id}"`, s.id);
  const result = await run(['workflow', 'show', '--session', s.id, '--json'], {
    db: stack.db,
    settings: { ...stack.settings, TEMPORAL_UI_URL: stack.temporalUiUrl! },
    temporal: async () => stack.env.client,
  });
  expect(result.exitCode).toBe(0);
  const shown = JSON.parse(result.stdout);
  expect(shown).toMatchObject({
    workflow_id: s.id,
    type: 'sessionWorkflow',
    status: 'RUNNING',
    task_queue: stack.taskQueue,
    search_attributes: expect.objectContaining({ ReferenceId: s.reference_id, SessionStatus: 'open', Mode: 'test' }),
    ui_url: `${stack.temporalUiUrl}/namespaces/default/workflows/${s.id}/${shown.run_id}/history`,
  });
  expect(shown.summary).toContain(s.reference_id);
  expect(shown.current_details).toMatch(/expires_at/);
  expect((await fetch(shown.ui_url)).status).toBe(200);

  const unknown = await run(['workflow', 'show', '--session', 'cs_test_nosuchsession', '--json'], {
    db: stack.db,
    settings: stack.settings,
    temporal: async () => stack.env.client,
  });
  expect([unknown.exitCode, JSON.parse(unknown.stdout).error.code]).toEqual([1, 'not_found']);
});

it('shows a session in the Web UI: the list filtered by ReferenceId and its history (screenshots)', async () => {
  const { s, pub } = await payableSession();
  const attempt = await pub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test' } });
  await pub('POST', `/test-gateway/${attempt.body.attempt_id}/decide`, { body: { decision: 'slow' } });
  const found = await untilFound(`ReferenceId = "${s.reference_id}" AND SessionStatus = "processing"`, s.id);

  const browser = await launchBrowser();
  try {
    const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    const ui = `${stack.temporalUiUrl}/namespaces/default`;
    await page.goto(`${ui}/workflows?query=${encodeURIComponent(`ReferenceId="${s.reference_id}"`)}`);
    await page.getByText(s.id).first().waitFor({ timeout: 30_000 });
    await keep(page, 'temporal-ui-list-by-reference-id');

    await page.goto(`${ui}/workflows/${s.id}/${found.runId}/history`);
    await page.getByText('slow button').first().waitFor({ timeout: 30_000 });
    await keep(page, 'temporal-ui-session-history');
  } finally {
    await browser.close();
  }
}, 120_000);

it('finds a failing webhook endpoint by EndpointStatus, and shows the list in the Web UI (screenshot)', async () => {
  const m = await buildMerchant(stack.db);
  stack.dispatchEventsOf(m.merchantId);
  const created = await call(stack.baseUrl, 'POST', '/v1/webhook_endpoints', {
    key: m.secretKey,
    idempotencyKey: `idem_${randomString(16)}`,
    body: { url: receiver.url(`/down-${randomString(8)}`), events: ['*'], mode: 'test' },
  });
  expect(created.status).toBe(201);
  const sent = await call(stack.baseUrl, 'POST', `/v1/webhook_endpoints/${created.body.id}/test`, {
    key: m.secretKey,
    body: { type: 'checkout.session.completed' },
  });
  expect(sent.status).toBe(202);
  const failing = `EndpointId = "${created.body.id}" AND EndpointStatus = "failing"`;
  const found = await untilFound(failing, created.body.id);
  expect(found.typedSearchAttributes.get(merchantIdKey)).toBe(m.merchantId);

  const shown = await run(['workflow', 'show', '--endpoint', created.body.id, '--json'], {
    db: stack.db,
    settings: { ...stack.settings, TEMPORAL_UI_URL: stack.temporalUiUrl! },
    temporal: async () => stack.env.client,
  });
  expect(JSON.parse(shown.stdout)).toMatchObject({
    workflow_id: created.body.id,
    search_attributes: expect.objectContaining({ EndpointStatus: 'failing' }),
  });

  const browser = await launchBrowser();
  try {
    const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    await page.goto(
      `${stack.temporalUiUrl}/namespaces/default/workflows?query=${encodeURIComponent('EndpointStatus="failing"')}`,
    );
    await page.getByText(created.body.id).first().waitFor({ timeout: 30_000 });
    await keep(page, 'temporal-ui-failing-endpoints');
  } finally {
    await browser.close();
  }
}, 120_000);

/** Saves a screenshot beside the browser tests' (not committed), and into docs/screenshots when asked. */
async function keep(page: import('playwright-core').Page, name: string) {
  const dir = join(__dirname, '..', 'e2e', 'screenshots');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${name}.png`);
  await page.screenshot({ path: file, animations: 'disabled' });
  if (process.env.UPDATE_DOC_SCREENSHOTS === '1') {
    copyFileSync(file, join(__dirname, '..', '..', 'docs', 'screenshots', `${name}.png`));
  }
}
