import { hash, verify } from '@node-rs/argon2';

/** Argon2id with OWASP's first recommended setting: 19 MiB, 2 passes, 1 lane. */
const PARAMS = { algorithm: 2 /* Argon2id */, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

/** The shortest password the console accepts (NIST SP 800-63B's floor for chosen passwords is 8; we ask 12). */
export const MIN_PASSWORD_LENGTH = 12;
export const MAX_PASSWORD_LENGTH = 256;

export const hashPassword = (password: string): Promise<string> => hash(password, PARAMS);

/** A hash computed once, verified against when the e-mail is unknown, so both cases take as long. */
let decoy: Promise<string> | null = null;

/** True when `password` matches `stored`; with no stored hash, spends the same time and says false. */
export async function passwordMatches(stored: string | null, password: string): Promise<boolean> {
  if (stored === null) {
    decoy ??= hashPassword('decoy password, never anyone’s');
    await verify(await decoy, password).catch(() => false);
    return false;
  }
  return verify(stored, password).catch(() => false);
}

/** Why a new password is refused, or null. */
export function passwordProblem(password: string): 'too_short' | 'too_long' | null {
  if ([...password].length < MIN_PASSWORD_LENGTH) return 'too_short';
  if (password.length > MAX_PASSWORD_LENGTH) return 'too_long';
  return null;
}
