import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { createApp } from '../src/app';
import { loadSettings } from '../src/config';
import { checkoutScopes, partnerScopes } from '../src/keys/scopes';
import { systemClock } from '../src/lib/clock';
import { randomString } from '../src/lib/ids';
import { setLogLevel } from '../src/lib/log';
import { createCheckoutKey } from '../src/ops/checkout-keys';
import { createMerchant } from '../src/ops/merchants';
import { createPartnerKey } from '../src/ops/partner-keys';
import { createSeller } from '../src/ops/sellers';
import { createWorker } from '../src/worker/create-worker';
import { promoteIfFresh } from '../src/worker/deployment';
import { deploymentVersionOf, releaseTargetOf } from '../src/temporal/deployment';
import { connectStack, startBenchEnvironment } from './bench/environment';
import { repoRoot } from './processes';

/**
 * `npm run fuzz`: Schemathesis against a running stack (API, worker, Temporal dev server,
 * Postgres) for every operation of both APIs with valid keys. It fails on any 5xx answer and on
 * any answer whose status, content type, headers or body break the OpenAPI document. Prints the
 * run time and the number of test cases. FUZZ_MAX_EXAMPLES (default 25) and FUZZ_SEED tune it;
 * FUZZ_VERBOSE=1 streams Schemathesis's own output, which otherwise goes to .data/fuzz/<pass>.log.
 */

/** Schemathesis, pinned, in its own virtualenv under .tools (git-ignored), installed on first use. */
const SCHEMATHESIS_PIN = 'schemathesis==4.32.5';
const VENV = join(repoRoot, '.tools', 'schemathesis');
const ST = join(VENV, 'bin', 'st');
const NAMESPACE = 'default';
const CHECKS = [
  'not_a_server_error',
  'status_code_conformance',
  'content_type_conformance',
  'response_headers_conformance',
  'response_schema_conformance',
].join(',');

/** FUZZ_VERBOSE=1 streams Schemathesis's output; otherwise it goes to .data/fuzz/<pass>.log and is shown only for a failed pass. */
const VERBOSE = process.env.FUZZ_VERBOSE === '1';

const log = (line: string) => process.stdout.write(`${line}\n`);

function installSchemathesis(): void {
  const version = existsSync(ST) ? spawnSync(ST, ['--version'], { encoding: 'utf8' }).stdout : '';
  if (version.includes(SCHEMATHESIS_PIN.split('==')[1])) return;
  log(`Installing ${SCHEMATHESIS_PIN} into ${VENV} (one time only)...`);
  rmSync(VENV, { recursive: true, force: true });
  const steps = [
    ['python3', ['-m', 'venv', VENV]],
    [join(VENV, 'bin', 'pip'), ['install', '--quiet', '--disable-pip-version-check', SCHEMATHESIS_PIN]],
  ] as const;
  for (const [command, args] of steps) {
    const result = spawnSync(command, args, {
      stdio: 'inherit',
      env: { ...process.env, PIP_ROOT_USER_ACTION: 'ignore' },
    });
    if (result.status !== 0)
      throw new Error(`${command} ${args.join(' ')} failed; fuzzing needs python3 with venv and pip`);
  }
}

interface Pass {
  name: string;
  schema: string;
  key: string;
  filter: string[];
}

interface PassResult {
  name: string;
  ok: boolean;
  seconds: number;
  cases: number;
  operations: number;
}

/** Runs one Schemathesis pass; its JUnit report gives the operations, its output the test-case count. */
async function runPass(pass: Pass, reportDir: string, maxExamples: number, seed: string): Promise<PassResult> {
  const junit = join(reportDir, `${pass.name}.xml`);
  const args = [
    'run',
    pass.schema,
    '--header',
    `Authorization: Bearer ${pass.key}`,
    '--checks',
    CHECKS,
    '--phases',
    'examples,coverage,fuzzing,stateful',
    '--max-examples',
    String(maxExamples),
    '--seed',
    seed,
    // One worker: several threads trip a CPython 3.11 race in compile() ("AST constructor recursion depth mismatch").
    '--workers',
    '1',
    '--request-timeout',
    '30',
    '--report',
    'junit',
    '--report-junit-path',
    junit,
    '--output-sanitize',
    'true',
    '--no-color',
    ...pass.filter,
  ];
  const logFile = join(reportDir, `${pass.name}.log`);
  log(`\n=== ${pass.name}: st ${args.filter((a) => !a.startsWith('Authorization')).join(' ')}`);
  log(
    `    output in ${logFile}${VERBOSE ? '' : ' (printed here only if the pass fails; FUZZ_VERBOSE=1 prints it always)'}`,
  );
  const started = Date.now();
  const output: string[] = [];
  const code = await new Promise<number>((resolve) => {
    // Run in the report folder: Schemathesis keeps its cache (.schemathesis/) in the working directory.
    const child = spawn(ST, args, {
      cwd: reportDir,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, NO_COLOR: '1' },
    });
    for (const stream of [child.stdout, child.stderr]) {
      stream.on('data', (chunk: Buffer) => {
        output.push(chunk.toString());
        if (VERBOSE) process.stdout.write(chunk);
      });
    }
    child.on('close', (c) => resolve(c ?? 1));
  });
  const text = output.join('');
  writeFileSync(logFile, text);
  if (code !== 0 && !VERBOSE) process.stdout.write(text);
  const cases = [...text.matchAll(/(\d+) generated/g)].reduce((sum, m) => sum + Number(m[1]), 0);
  const report = existsSync(junit) ? readFileSync(junit, 'utf8') : '';
  const operations = (report.match(/<testcase /g) ?? []).length;
  return { name: pass.name, ok: code === 0, seconds: (Date.now() - started) / 1000, cases, operations };
}

async function main(): Promise<void> {
  const started = Date.now();
  setLogLevel('silent');
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  installSchemathesis();
  const env = await startBenchEnvironment('fuzz', NAMESPACE, log);
  let failed = true;
  try {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    env.onClose(() => new Promise((resolve) => server.close(resolve)));
    const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const settings = loadSettings({
      DATABASE_URL: env.databaseUrl,
      TEMPORAL_ADDRESS: env.temporalAddress,
      TEMPORAL_TASK_QUEUE: `fuzz-${randomString(6)}`,
      PUBLIC_BASE_URL: baseUrl,
      // The limits still count every request and answer with their headers; fuzzing should not stop at them.
      CHECKOUT_RATE_LIMIT_PER_SECOND: '1000000',
      PARTNER_BULK_RATE_LIMIT: '1000000',
      LOG_LEVEL: 'silent',
    });
    const { appDb, workerDb, nativeConnection, temporal } = await connectStack(
      env,
      NAMESPACE,
      settings.DATABASE_POOL_MAX,
    );
    log('Bundling the workflows and starting the worker...');
    const version = deploymentVersionOf(settings);
    const worker = await createWorker({
      deployment: version,
      connection: nativeConnection,
      namespace: NAMESPACE,
      taskQueue: settings.TEMPORAL_TASK_QUEUE,
      db: workerDb,
      clock: systemClock,
      publicBaseUrl: settings.PUBLIC_BASE_URL,
    });
    const running = worker.run();
    // A fresh dev server routes new runs to a current build only: this one makes itself current, as `npm run worker` does.
    if (version) {
      const target = { ...releaseTargetOf(settings), namespace: NAMESPACE };
      await promoteIfFresh(nativeConnection, target, version.buildId, worker.options.identity);
    }
    env.onClose(async () => {
      worker.shutdown();
      await running;
    });
    server.on('request', createApp({ db: appDb, settings, clock: systemClock, temporal }).callback());

    const seller = await createSeller(appDb, { name: 'Fuzz seller', locations: 1 });
    const partnerKey = await createPartnerKey(appDb, {
      sellerId: seller.seller_id,
      env: 'test',
      scopes: [...partnerScopes],
    });
    const merchant = await createMerchant(appDb, {
      name: 'Fuzz merchant',
      returnHosts: ['shop.example.com'],
      contactEmail: 'ops@shop.example.com',
      methods: ['test', 'cashondelivery'],
      testMerchant: true,
    });
    const secret = await createCheckoutKey(appDb, {
      merchantId: merchant.merchant_id,
      mode: 'test',
      type: 'secret',
      scopes: [...checkoutScopes],
    });
    const publishable = await createCheckoutKey(appDb, {
      merchantId: merchant.merchant_id,
      mode: 'test',
      type: 'publishable',
    });

    const reportDir = join(repoRoot, '.data', 'fuzz');
    mkdirSync(reportDir, { recursive: true });
    const maxExamples = Number(process.env.FUZZ_MAX_EXAMPLES ?? 25);
    const seed = process.env.FUZZ_SEED ?? String(Date.now() % 1_000_000);
    log(`Stack up at ${baseUrl}; seed ${seed}, at most ${maxExamples} examples per operation and phase.`);
    const passes: Pass[] = [
      { name: 'partner', schema: `${baseUrl}/partner/v1/openapi.json`, key: partnerKey.key, filter: [] },
      {
        name: 'checkout-merchant',
        schema: `${baseUrl}/v1/openapi.json`,
        key: secret.key,
        filter: ['--exclude-path-regex', '^/public/'],
      },
      {
        name: 'checkout-public',
        schema: `${baseUrl}/v1/openapi.json`,
        key: publishable.key,
        filter: ['--include-path-regex', '^/public/'],
      },
    ];
    const results: PassResult[] = [];
    for (const pass of passes) results.push(await runPass(pass, reportDir, maxExamples, seed));

    log('\nfuzz summary');
    for (const r of results) {
      log(
        `  ${r.name.padEnd(18)} ${r.ok ? 'passed' : 'FAILED'}  ${String(r.operations).padStart(3)} operations  ${String(r.cases).padStart(5)} test cases  ${r.seconds.toFixed(1)} s`,
      );
    }
    const cases = results.reduce((n, r) => n + r.cases, 0);
    const seconds = (Date.now() - started) / 1000;
    log(`  total: ${cases} test cases in ${seconds.toFixed(1)} s (stack start included); reports in ${reportDir}`);
    const failedPasses = results.filter((r) => !r.ok).length;
    log(`fuzz: ${results.length - failedPasses} passed, ${failedPasses} failed (${cases} test cases)`);
    failed = failedPasses > 0;
  } finally {
    await env.close();
  }
  process.exit(failed ? 1 : 0);
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
