import { continueAsNew, proxyActivities, sleep, workflowInfo } from '@temporalio/workflow';
import type { JanitorActivities } from '../activities/janitor';
import { janitorSchedule } from '../src/temporal/names';

const { sweepRetention } = proxyActivities<JanitorActivities>({
  startToCloseTimeout: '5 minutes',
  retry: { maximumInterval: '1 minute' },
});

/** Sweeps retention every hour, for ever; continues as new before its history grows large. */
export async function janitorWorkflow(): Promise<void> {
  for (let sweep = 0; sweep < janitorSchedule.sweepsPerRun; sweep++) {
    await sweepRetention({ nowMs: Date.now() });
    await sleep(janitorSchedule.every);
    if (workflowInfo().continueAsNewSuggested) break;
  }
  await continueAsNew<typeof janitorWorkflow>();
}
