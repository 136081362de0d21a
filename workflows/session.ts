import { condition, proxyActivities, setHandler } from '@temporalio/workflow';
import type { SessionActivities } from '../activities/session';
import { sessionSettledSignal, SessionWorkflowInput } from '../src/temporal/session-messages';

const { expireSession } = proxyActivities<SessionActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { maximumInterval: '1 minute' },
  summary: 'expire the session if it is still open',
});

/**
 * One per checkout session (workflow id = session id): holds the timer for `expires_at` and
 * expires the session when it fires, unless the session was settled first.
 */
export async function sessionWorkflow({ expiresInMs, sessionId }: SessionWorkflowInput): Promise<string> {
  let settled: string | null = null;
  setHandler(sessionSettledSignal, ({ status }) => {
    settled = status;
  });
  const settledFirst = await condition(() => settled !== null, Math.max(expiresInMs, 1), {
    summary: 'until expires_at, unless settled first',
  });
  if (settledFirst) return settled!;
  const { status } = await expireSession({ sessionId });
  return status;
}
