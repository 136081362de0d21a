/** A refusal by an operator command (bad flag, unknown object); the CLI prints `code` and `message`. */
export class OpsError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'OpsError';
  }
}
