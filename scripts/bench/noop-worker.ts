import { NativeConnection, Worker } from '@temporalio/worker';

/**
 * The floor's worker as a process of its own (as the session worker runs in bench:sessions): polls
 * TEMPORAL_TASK_QUEUE for `benchNoopWorkflow` and says "worker running" once it does; stops on
 * SIGINT or SIGTERM.
 */
async function main(): Promise<void> {
  const connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS });
  const worker = await Worker.create({
    connection,
    namespace: process.env.TEMPORAL_NAMESPACE,
    taskQueue: process.env.TEMPORAL_TASK_QUEUE!,
    workflowsPath: require.resolve('./noop-workflow'),
  });
  const running = worker.run();
  process.stdout.write('worker running\n');
  await running;
  await connection.close();
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
