import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { CidrSet, normalizeIp } from '../shared/cidr';

/**
 * Deliveries go only to public addresses unless the operator allows private networks: loopback,
 * private, carrier-grade NAT, link-local (cloud metadata at 169.254.169.254 and fd00:ec2::254),
 * multicast and reserved ranges are refused. The check runs on the address actually connected to
 * (a custom DNS lookup), so a name that resolves to a private address later is refused too.
 */
const BLOCKED = CidrSet.of([
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '224.0.0.0/4',
  '240.0.0.0/4',
  '::/128',
  '::1/128',
  'fc00::/7',
  'fe80::/10',
  'ff00::/8',
  '64:ff9b::/96',
]);

export function isBlockedAddress(address: string): boolean {
  return BLOCKED.has(normalizeIp(address));
}

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
  if (!allowPrivate && (host === 'localhost' || host.endsWith('.localhost') || (isIP(host) !== 0 && isBlockedAddress(host)))) {
    return 'points at a loopback, private, link-local or metadata address';
  }
  return undefined;
}

/**
 * `urlProblem`, and for a host name, whether it resolves to a blocked address now (at write time;
 * a name that fails to resolve is let through: it cannot be called until it resolves). Used for
 * channel base URLs, which receive the account's credentials.
 */
export async function resolvedUrlProblem(raw: string, allowPrivate: boolean): Promise<string | undefined> {
  const problem = urlProblem(raw, allowPrivate);
  if (problem || allowPrivate) return problem;
  const host = new URL(raw).hostname.replace(/^\[|\]$/g, '');
  if (isIP(host) !== 0) return undefined;
  let addresses: dns.LookupAddress[];
  try {
    addresses = await dns.promises.lookup(host, { all: true });
  } catch {
    return undefined;
  }
  const blocked = addresses.find((a) => isBlockedAddress(a.address));
  return blocked ? `resolves to a loopback, private, link-local or metadata address (${blocked.address})` : undefined;
}

export interface PostResult {
  statusCode?: number;
  error?: string;
}

/** POSTs `body` with `headers`; no redirect is followed (a 3xx is a failure), `timeoutMs` for the whole exchange. */
export function postJson(rawUrl: string, headers: Record<string, string>, body: string, options: { timeoutMs: number; allowPrivate: boolean }): Promise<PostResult> {
  const problem = urlProblem(rawUrl, options.allowPrivate);
  if (problem) return Promise.resolve({ error: `URL ${problem}` });
  const url = new URL(rawUrl);
  const lookup: LookupFunction = (hostname, lookupOptions, callback) => {
    dns.lookup(hostname, { ...lookupOptions, all: true }, (error, addresses) => {
      if (error) return callback(error, '', 0);
      const list = addresses as dns.LookupAddress[];
      const blocked = list.find((a) => !options.allowPrivate && isBlockedAddress(a.address));
      if (blocked) return callback(new Error(`${hostname} resolves to a blocked address (${blocked.address})`), '', 0);
      if (lookupOptions.all) return callback(null, list as never, 0);
      const first = list[0];
      if (!first) return callback(new Error(`${hostname} has no address`), '', 0);
      return callback(null, first.address, first.family);
    });
  };
  return new Promise((resolve) => {
    const transport = url.protocol === 'https:' ? https : http;
    const request = transport.request(
      url,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'user-agent': 'creative-gateway-webhooks', ...headers, 'content-length': String(Buffer.byteLength(body)) },
        lookup,
        signal: AbortSignal.timeout(options.timeoutMs),
      },
      (response) => {
        // Only the status matters; drain a bounded amount and finish.
        response.resume();
        response.on('end', () => resolve({ statusCode: response.statusCode }));
        response.on('error', () => resolve({ statusCode: response.statusCode }));
      },
    );
    request.on('error', (error: Error) => {
      resolve({ error: error.name === 'AbortError' || error.name === 'TimeoutError' ? `no answer within ${options.timeoutMs / 1000} s` : error.message.slice(0, 300) });
    });
    request.end(body);
  });
}
