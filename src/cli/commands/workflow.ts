import { OpsError } from '../../ops/errors';
import { showWorkflow, WorkflowTarget } from '../../ops/workflows';
import type { CommandTable } from '../command';

/** `workflow …` */
export const workflowCommands: CommandTable = {
  'workflow show': {
    flags: { session: 'value', endpoint: 'value', refund: 'value' },
    async run(f, deps) {
      const given = (['session', 'endpoint', 'refund'] as const).flatMap((kind) => {
        const id = f.optional(kind);
        return id === undefined ? [] : [{ [kind]: id } as WorkflowTarget];
      });
      if (given.length !== 1)
        throw new OpsError('invalid_flags', 'give exactly one of --session, --endpoint, --refund');
      if (!deps.temporal) throw new OpsError('temporal_unavailable', 'this command needs a Temporal connection');
      return showWorkflow(await deps.temporal(), deps.settings, given[0]);
    },
  },
};
