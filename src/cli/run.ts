import { OpsError } from '../ops/errors';
import { parseFlags, splitCommand } from './args';
import type { CliDeps } from './command';
import { commands } from './commands';
import { CliResult, renderError, renderJson, renderText } from './render';

/** The command list: each command with the flags it accepts. */
function help(): object {
  return {
    commands: Object.entries(commands).map(([name, c]) => ({
      command: name,
      flags: Object.keys(c.flags).map((f) => `--${f}`),
    })),
  };
}

/** Runs one CLI invocation in process: parse, dispatch to the service, render; never throws. */
export async function run(argv: readonly string[], deps: CliDeps): Promise<CliResult> {
  const { words, rest, json } = splitCommand(argv);
  const render = json ? renderJson : renderText;
  try {
    const name = words.join(' ');
    if (name === 'help') return { exitCode: 0, stdout: render(help()), stderr: '' };
    const command = commands[name];
    if (!command) throw new OpsError('unknown_command', `unknown command "${name}"; run "help" for the list`);
    const result = await command.run(parseFlags(rest, command.flags), deps);
    return { exitCode: 0, stdout: render(result), stderr: '' };
  } catch (err) {
    if (err instanceof OpsError) return renderError(err.code, err.message, json);
    const failed = renderError('internal_error', err instanceof Error ? err.message : String(err), json);
    return { ...failed, stderr: `${failed.stderr}${err instanceof Error ? err.stack : ''}\n` };
  }
}
