import { Counter } from 'prom-client';
import { registry } from './metrics';

/** Console actions by name (a fixed set in src/console) and outcome (success|denied|failed). */
export const consoleActions = new Counter({
  name: 'svc_console_actions_total',
  help: 'Console actions (sign-ins, second factors, re-authentication, passkeys, invites, users disabled and enabled, key, order, bulk order, stock and price actions, session revokes) by action and outcome success|denied|failed.',
  labelNames: ['action', 'outcome'] as const,
  registers: [registry],
});
