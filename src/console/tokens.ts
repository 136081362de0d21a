import { randomBytes } from 'node:crypto';
import { sha256Hex } from '../lib/hash';

/** A new bearer token for a cookie or a link: 32 random bytes, base64url (256 bits). */
export const newToken = (): string => randomBytes(32).toString('base64url');

/** What is stored of a token: its SHA-256 (a token has 256 bits, so no slow hash is needed). */
export const tokenHash = (token: string): string => sha256Hex(`console:${token}`);
