import {
  continueAsNew,
  proxyActivities,
  setCurrentDetails,
  setWorkflowOptions,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import type { JanitorActivities } from '../activities/janitor';
import { janitorSchedule } from '../src/temporal/janitor';
import { versioningBehaviors } from '../src/temporal/versioning';

const { sweepRetention } = proxyActivities<JanitorActivities>({
  startToCloseTimeout: '5 minutes',
  retry: { maximumInterval: '1 minute' },
  summary: 'delete idempotency records and rate-limit windows past retention',
});

setWorkflowOptions({ versioningBehavior: versioningBehaviors.janitorWorkflow }, janitorWorkflow);

/** Sweeps retention every hour, for ever; continues as new before its history grows large. */
export async function janitorWorkflow(): Promise<void> {
  for (let sweep = 0; sweep < janitorSchedule.sweepsPerRun; sweep++) {
    setCurrentDetails(`sweep ${sweep + 1} of ${janitorSchedule.sweepsPerRun} in this run`);
    await sweepRetention({ nowMs: Date.now() });
    setCurrentDetails(
      `swept ${sweep + 1} of ${janitorSchedule.sweepsPerRun} in this run; next in ${janitorSchedule.every}`,
    );
    await sleep(janitorSchedule.every, { summary: `until the next sweep (every ${janitorSchedule.every})` });
    if (workflowInfo().continueAsNewSuggested) break;
  }
  await continueAsNew<typeof janitorWorkflow>();
}
