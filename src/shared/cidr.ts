import { BlockList, isIP } from 'node:net';

export interface Cidr {
  address: string;
  prefix: number;
  family: 'ipv4' | 'ipv6';
}

/** `203.0.113.0/24`, `2001:db8::/32`, or a single address (a /32 or /128); undefined when malformed. */
export function parseCidr(text: string): Cidr | undefined {
  const [address = '', prefixText, extra] = text.trim().split('/');
  if (extra !== undefined) return undefined;
  const version = isIP(address);
  if (version === 0) return undefined;
  const max = version === 4 ? 32 : 128;
  if (prefixText !== undefined && !/^(0|[1-9][0-9]{0,2})$/.test(prefixText)) return undefined;
  const prefix = prefixText === undefined ? max : Number(prefixText);
  if (prefix > max) return undefined;
  return { address, prefix, family: version === 4 ? 'ipv4' : 'ipv6' };
}

/** `::ffff:198.51.100.7` (an IPv4 peer on a dual-stack socket) is `198.51.100.7`. */
export function normalizeIp(address: string): string {
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  return mapped ? (mapped[1] as string) : address;
}

/** A set of CIDRs to test addresses against (IPv4 and IPv6). */
export class CidrSet {
  private readonly list = new BlockList();

  constructor(cidrs: readonly Cidr[]) {
    for (const cidr of cidrs) this.list.addSubnet(cidr.address, cidr.prefix, cidr.family);
  }

  /** Throws on a malformed entry (callers validate user input first). */
  static of(texts: readonly string[]): CidrSet {
    return new CidrSet(
      texts.map((text) => {
        const cidr = parseCidr(text);
        if (!cidr) throw new Error(`not a CIDR: ${text}`);
        return cidr;
      }),
    );
  }

  has(address: string): boolean {
    const ip = normalizeIp(address.trim());
    const version = isIP(ip);
    if (version === 0) return false;
    return this.list.check(ip, version === 4 ? 'ipv4' : 'ipv6');
  }
}

/**
 * The client's address: the socket peer, unless that peer is a trusted proxy; then the
 * X-Forwarded-For hops are read right to left, skipping trusted proxies, and the first untrusted
 * hop is the client. A header sent by an untrusted peer is never read.
 */
export function clientAddress(socketAddress: string | undefined, forwardedFor: string | undefined, trustedProxies: CidrSet | undefined): string {
  let client = normalizeIp(socketAddress ?? '');
  if (!trustedProxies || !forwardedFor) return client;
  const hops = forwardedFor.split(',').map((hop) => normalizeIp(hop.trim())).filter((hop) => hop !== '');
  while (trustedProxies.has(client)) {
    const next = hops.pop();
    if (next === undefined || isIP(next) === 0) break;
    client = next;
  }
  return client;
}
