/** A source of the current time, injected so tests can move it. */
export type Clock = () => Date;

export const systemClock: Clock = () => new Date();
