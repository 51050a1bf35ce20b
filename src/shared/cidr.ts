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
  // A zone id (`fe80::1%eth0`) names an interface of one host: no entry of a list means it, and matching would ignore it.
  const version = address.includes('%') ? 0 : isIP(address);
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

/** The eight 16-bit groups of an IPv6 address (a dotted IPv4 tail read as the last two); undefined for anything else. */
function ipv6Groups(address: string): number[] | undefined {
  if (isIP(address) !== 6) return undefined;
  let text = address.toLowerCase();
  const dotted = /(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const groups = (part: string) => (part === '' ? [] : part.split(':').map((group) => parseInt(group, 16)));
  const [head = '', tail] = text.split('::');
  if (tail === undefined) return groups(head);
  const before = groups(head);
  const after = groups(tail);
  return [...before, ...new Array<number>(8 - before.length - after.length).fill(0), ...after];
}

/**
 * The IPv4 address an IPv6 spelling carries in its last 32 bits, for the forms that reach that IPv4
 * host: IPv4-mapped `::ffff:0:0/96`, IPv4-compatible `::/96`, IPv4-translated `::ffff:0:0:0/96`
 * (RFC 2765) and the NAT64 well-known prefix `64:ff9b::/96` (RFC 6052). Undefined for any other
 * address (IPv4 ones included). A local-use NAT64 prefix (`64:ff9b:1::/48`) places the IPv4 address
 * where its operator chose, so it cannot be read back: callers refuse that whole range.
 */
export function embeddedIpv4(address: string): string | undefined {
  const g = ipv6Groups(address);
  if (!g || g.length !== 8) return undefined;
  const zero = (from: number, to: number) => g.slice(from, to).every((group) => group === 0);
  const carries =
    (zero(0, 5) && g[5] === 0xffff) || (zero(0, 4) && g[4] === 0xffff && g[5] === 0) || zero(0, 6) || (g[0] === 0x64 && g[1] === 0xff9b && zero(2, 6));
  if (!carries) return undefined;
  const [high, low] = [g[6] as number, g[7] as number];
  return `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`;
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
 * One X-Forwarded-For hop as proxies write it: a bare IPv4 or IPv6 address, `198.51.100.7:443`,
 * `[2001:db8::7]` or `[2001:db8::7]:443`; undefined for anything else (`unknown`, `_`, zone ids,
 * stray characters), which the caller must not mistake for a trusted proxy.
 */
export function parseForwardedHop(hop: string): string | undefined {
  const text = hop.trim();
  // A zone id (`fe80::1%eth0`) is local to the sender's host: no address to check against a list.
  if (text.includes('%')) return undefined;
  const bracketed = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(text);
  if (bracketed) {
    const inner = bracketed[1] as string;
    return isIP(inner) === 6 && validPort(bracketed[2]) ? normalizeIp(inner) : undefined;
  }
  const withPort = /^(\d{1,3}(?:\.\d{1,3}){3}):(\d{1,5})$/.exec(text);
  if (withPort) return isIP(withPort[1] as string) === 4 && validPort(withPort[2]) ? (withPort[1] as string) : undefined;
  return isIP(text) === 0 ? undefined : normalizeIp(text);
}

function validPort(port: string | undefined): boolean {
  return port === undefined || Number(port) <= 65535;
}

/**
 * The client's address: the socket peer, unless that peer is a trusted proxy; then the
 * X-Forwarded-For hops are read right to left, skipping trusted proxies, and the first untrusted
 * hop is the client. A hop that is not an address is the client too (as its raw text, which no
 * allow-list matches): stopping there and keeping the proxy would let a client pick the proxy's
 * address by writing garbage. A header sent by an untrusted peer is never read.
 */
export function clientAddress(socketAddress: string | undefined, forwardedFor: string | undefined, trustedProxies: CidrSet | undefined): string {
  let client = normalizeIp(socketAddress ?? '');
  if (!trustedProxies || forwardedFor === undefined) return client;
  // Empty hops (`, 203.0.113.5`, a proxy appending to an empty header) say nothing: skipped.
  const hops = forwardedFor.split(',').filter((hop) => hop.trim() !== '');
  while (trustedProxies.has(client)) {
    const next = hops.pop();
    if (next === undefined) break;
    const address = parseForwardedHop(next);
    if (address === undefined) return unparsableHop(next);
    client = address;
  }
  return client;
}

/** Shown in the 403 message; bounded and printable so a hostile header cannot bloat or break it. */
function unparsableHop(hop: string): string {
  return `unparsable:${hop
    .trim()
    .replace(/[^\x21-\x7e]/g, '?')
    .slice(0, 64)}`;
}
