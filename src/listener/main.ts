import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { listen } from './listen';

const USAGE =
  'Usage: npm run -s listen -- --api http://localhost:3000 --key <secret key> --forward-to http://localhost:4242/webhooks [--events type,...] [--state <file>]';

/** `npm run -s listen`: forwards the merchant's events to a local URL, signed like real deliveries. */
async function main(): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        api: { type: 'string' },
        key: { type: 'string' },
        'forward-to': { type: 'string' },
        events: { type: 'string' },
        state: { type: 'string' },
      },
    }));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (!values.api || !values.key || !values['forward-to']) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  // One state file per API and key: each keeps its own place and signing secret.
  const id = createHash('sha256').update(`${values.api}\n${values.key}`).digest('hex').slice(0, 16);
  const controller = new AbortController();
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      process.stdout.write('Stopping after the current event...\n');
      controller.abort();
    });
  }
  await listen({
    api: values.api,
    key: values.key,
    forwardTo: values['forward-to'],
    events: values.events ? values.events.split(',').filter(Boolean) : [],
    statePath: values.state ?? join(__dirname, '..', '..', '.data', 'listen', `${id}.json`),
    signal: controller.signal,
    log: (line) => process.stdout.write(`${line}\n`),
  });
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
