/** Target check: refuses non-HTTPS, credentialed and non-public URLs at registration and again before every send. */
import { promises as dns } from 'node:dns';
import { BlockList, isIP } from 'node:net';

/** Why a webhook URL is refused (`details.issue` of the 400, or a delivery row's `error`). */
export type UrlIssue = 'https_required' | 'credentials' | 'private_target' | 'unresolvable';

/** Resolves a host name to every address it has (an error or no address means unresolvable). */
export type Resolver = (host: string) => Promise<string[]>;

/** The operating system's resolver, as a connection would use it. */
export const systemResolver: Resolver = async (host) =>
  (await dns.lookup(host, { all: true, verbatim: true })).map((a) => a.address);

/** A URL that passed the checks, with the address a delivery must connect to. */
export interface CheckedTarget {
  url: URL;
  /** The host name without brackets or a trailing dot, lower-case. */
  host: string;
  /** The address that was checked; deliveries connect to it and nothing else. */
  address: string;
  family: 4 | 6;
}

export type UrlCheck = { ok: true; target: CheckedTarget } | { ok: false; issue: UrlIssue; message: string };

/** Special-purpose ranges (IANA registries): loopback, private, link-local, shared, documentation, multicast… */
const nonPublic = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  nonPublic.addSubnet(net, prefix, 'ipv4');
}
for (const [net, prefix] of [
  ['::', 96], // unspecified, loopback and IPv4-compatible (::a.b.c.d, deprecated): ::7f00:1 is 127.0.0.1
  ['::ffff:0:0:0', 96], // IPv4-translated (SIIT): embeds an IPv4 address
  ['64:ff9b::', 96], // NAT64: could reach any IPv4 address, private ones included
  ['64:ff9b:1::', 48],
  ['100::', 64],
  ['2001::', 23],
  ['2001:db8::', 32],
  ['2002::', 16], // 6to4: embeds an IPv4 address
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const) {
  nonPublic.addSubnet(net, prefix, 'ipv6');
}

/** True for an address on the public internet (IPv4-mapped IPv6 is judged by its IPv4 address). */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return false;
  try {
    return !nonPublic.check(address, family === 4 ? 'ipv4' : 'ipv6');
  } catch {
    return false; // an address BlockList cannot read (a zone id) is not trusted
  }
}

/** Names that are never public whatever they resolve to. */
function isLocalName(host: string): boolean {
  return ['localhost', 'local', 'internal'].some((n) => host === n || host.endsWith(`.${n}`));
}

const refuse = (issue: UrlIssue, message: string): UrlCheck => ({ ok: false, issue, message });

/**
 * Checks a webhook URL: https, no credentials, not a local name, and every address the host
 * resolves to public. Hosts on `allowedHosts` skip the name and address checks (local development
 * and tests). Run at registration and again before every delivery, which then connects to the
 * returned address only (a name that resolves elsewhere a moment later changes nothing).
 */
export async function checkWebhookUrl(
  raw: string,
  opts: { allowedHosts: readonly string[]; resolve: Resolver },
): Promise<UrlCheck> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return refuse('https_required', 'url must be an absolute https URL.');
  }
  if (url.protocol !== 'https:') return refuse('https_required', 'url must use https.');
  if (url.username !== '' || url.password !== '') return refuse('credentials', 'url must not carry credentials.');
  const host = url.hostname
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '')
    .toLowerCase();
  const allowed = opts.allowedHosts.includes(host);
  if (!allowed && isLocalName(host)) {
    return refuse('private_target', 'url must not point at localhost, .local or .internal hosts.');
  }

  let addresses: string[];
  if (isIP(host) !== 0) addresses = [host];
  else {
    try {
      addresses = await opts.resolve(host);
    } catch {
      addresses = [];
    }
  }
  if (addresses.length === 0) return refuse('unresolvable', `The host ${host} does not resolve.`);
  if (!allowed && !addresses.every(isPublicAddress)) {
    return refuse('private_target', `The host ${host} resolves to a private, loopback or link-local address.`);
  }
  const address = addresses[0];
  return { ok: true, target: { url, host, address, family: isIP(address) === 6 ? 6 : 4 } };
}
