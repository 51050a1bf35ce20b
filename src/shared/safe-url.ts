import dns from 'node:dns';
import { isIP } from 'node:net';
import { CidrSet, embeddedIpv4, normalizeIp } from './cidr';

/**
 * Every outbound connection (upstream API calls, result downloads, image inputs fetched from URLs,
 * webhook deliveries, moderation hooks: src/shared/outbound.ts) goes only to public addresses unless
 * the operator allows private networks for that kind of call: loopback, private, carrier-grade NAT,
 * multicast, reserved and documentation ranges are refused, in every spelling an IPv6 literal can
 * give an IPv4 address (read back by embeddedIpv4: IPv4-mapped, IPv4-compatible, IPv4-translated,
 * NAT64). The check runs on the address actually connected to, so a name that resolves to a private
 * address later is refused too.
 */
const BLOCKED = CidrSet.of([
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  // Documentation (RFC 5737, RFC 3849): no real host lives there.
  '192.0.2.0/24',
  '198.51.100.0/24',
  '203.0.113.0/24',
  '2001:db8::/32',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '224.0.0.0/4',
  '240.0.0.0/4',
  '::/96',
  '::ffff:0:0:0/96',
  'fc00::/7',
  'fe80::/10',
  'ff00::/8',
]);

/**
 * Refused even where private networks are allowed: link-local addresses and the cloud metadata
 * services on them (169.254.169.254 on AWS, GCP and Azure; fd00:ec2::254 on AWS; 100.100.100.200 on
 * Alibaba Cloud), in every IPv6 spelling of those IPv4 addresses; and NAT64 (`64:ff9b::/96`,
 * `64:ff9b:1::/48`): a translator sends those anywhere in IPv4, the metadata address included. A
 * private upstream is a server the operator runs; a metadata service hands out the machine's own
 * credentials.
 */
const ALWAYS_BLOCKED = CidrSet.of(['169.254.0.0/16', 'fe80::/10', 'fd00:ec2::254/128', '100.100.100.200/32', '64:ff9b::/96', '64:ff9b:1::/48']);

/** Whether `address` may not be connected to; with `allowPrivate`, only link-local, metadata and NAT64 addresses are refused. */
export function isBlockedAddress(address: string, allowPrivate = false): boolean {
  const ip = normalizeIp(address);
  const carried = embeddedIpv4(ip);
  const forms = carried === undefined ? [ip] : [ip, carried];
  return forms.some((form) => ALWAYS_BLOCKED.has(form)) || (!allowPrivate && forms.some((form) => BLOCKED.has(form)));
}

const BLOCKED_PROBLEM = 'points at a loopback, private, link-local or metadata address';

/** Why a URL may not receive webhooks at all (shape, scheme, a literal blocked address), or undefined. */
export function urlProblem(raw: string, allowPrivate: boolean): string | undefined {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'is not a URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must be http or https';
  if (url.username || url.password) return 'must not carry credentials';
  const host = url.hostname.replace(/^\[|\]$/g, '').replace(/\.$/, '');
  if (isIP(host) !== 0 && isBlockedAddress(host, allowPrivate)) return allowPrivate ? 'points at a link-local or metadata address' : BLOCKED_PROBLEM;
  if (!allowPrivate && (host === 'localhost' || host.endsWith('.localhost'))) return BLOCKED_PROBLEM;
  return undefined;
}

/**
 * `urlProblem`, and for a host name, whether it resolves to a blocked address now (at write time;
 * a name that fails to resolve is let through: it cannot be called until it resolves). Used for
 * channel base URLs, which receive the account's credentials.
 */
export async function resolvedUrlProblem(raw: string, allowPrivate: boolean): Promise<string | undefined> {
  const problem = urlProblem(raw, allowPrivate);
  if (problem) return problem;
  const blocked = (await addressesOf(raw)).find((address) => isBlockedAddress(address, allowPrivate));
  if (blocked === undefined) return undefined;
  return `resolves to a ${allowPrivate ? 'link-local or metadata' : 'loopback, private, link-local or metadata'} address (${blocked})`;
}

/** The addresses a URL's host is (a literal) or resolves to now; none when it does not resolve. */
async function addressesOf(raw: string): Promise<string[]> {
  const host = new URL(raw).hostname.replace(/^\[|\]$/g, '');
  if (isIP(host) !== 0) return [host];
  try {
    return (await dns.promises.lookup(host, { all: true })).map((a) => a.address);
  } catch {
    return [];
  }
}

/** Whether a URL's host is, or resolves now to, an address only allowed where private networks are. */
export async function pointsAtPrivateAddress(raw: string): Promise<boolean> {
  const host = new URL(raw).hostname.replace(/^\[|\]$/g, '').replace(/\.$/, '');
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  return (await addressesOf(raw)).some((address) => isBlockedAddress(address));
}
