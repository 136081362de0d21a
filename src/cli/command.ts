import type { Client } from '@temporalio/client';
import type { Settings } from '../config';
import type { Db } from '../db/knex';
import type { Flags, FlagSpec } from './args';

/** What commands need from the outside world; tests inject their own. */
export interface CliDeps {
  db: Db;
  settings: Settings;
  /** A Temporal client, connected on first use; only the `workflow` commands need one. */
  temporal?: () => Promise<Client>;
}

/** One `<group> <command>`: the flags it accepts and the service call they map to. */
export interface Command {
  flags: FlagSpec;
  run(flags: Flags, deps: CliDeps): Promise<object>;
}

export type CommandTable = Readonly<Record<string, Command>>;
