import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { CidrSet, normalizeIp } from './cidr';

/**
 * Webhook deliveries, image inputs fetched from URLs and API channels' upstreams go only to public
 * addresses unless the operator allows private networks: loopback, private, carrier-grade NAT,
 * link-local, multicast and reserved ranges are refused, in every spelling an IPv6 literal can give
 * them (IPv4-mapped `::ffff:0:0/96`, IPv4-compatible `::/96`, IPv4-translated `::ffff:0:0:0/96`,
 * NAT64 `64:ff9b::/96` and `64:ff9b:1::/48`). The check runs on the address actually connected to
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
  '::/96',
  '::ffff:0:0:0/96',
  'fc00::/7',
  'fe80::/10',
  'ff00::/8',
  '64:ff9b::/96',
  '64:ff9b:1::/48',
]);

/**
 * Refused even where private networks are allowed: link-local addresses and the cloud metadata
 * services on them (169.254.169.254 on AWS, GCP and Azure; fd00:ec2::254 on AWS; 100.100.100.200 on
 * Alibaba Cloud), in their IPv4-compatible and IPv4-translated spellings too. A private upstream is a
 * server the operator runs; a metadata service hands out the machine's own credentials.
 */
const ALWAYS_BLOCKED = CidrSet.of(['169.254.0.0/16', '::a9fe:0/112', '::ffff:0:a9fe:0/112', 'fe80::/10', 'fd00:ec2::254/128', '100.100.100.200/32']);

/** Whether `address` may not be connected to; with `allowPrivate`, only link-local and metadata addresses are refused. */
export function isBlockedAddress(address: string, allowPrivate = false): boolean {
  const ip = normalizeIp(address);
  return ALWAYS_BLOCKED.has(ip) || (!allowPrivate && BLOCKED.has(ip));
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

/** The `code` of the error a guarded lookup fails with for a blocked address. */
export const BLOCKED_ADDRESS_CODE = 'EBLOCKEDADDRESS';

/**
 * A DNS lookup that refuses names resolving to a blocked address (with `allowPrivate`, only
 * link-local and metadata ones), so the check holds for the address actually connected to.
 */
export function guardedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, lookupOptions, callback) => {
    dns.lookup(hostname, { ...lookupOptions, all: true }, (error, addresses) => {
      if (error) return callback(error, '', 0);
      const list = addresses as dns.LookupAddress[];
      const blocked = list.find((a) => isBlockedAddress(a.address, allowPrivate));
      if (blocked)
        return callback(Object.assign(new Error(`${hostname} resolves to a blocked address (${blocked.address})`), { code: BLOCKED_ADDRESS_CODE }), '', 0);
      if (lookupOptions.all) return callback(null, list as never, 0);
      const first = list[0];
      if (!first) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '', 0);
      return callback(null, first.address, first.family);
    });
  };
}

/** Why a guarded download failed: `unreachable` (address, scheme, status, time, network) or `too_large`. */
export class GuardedFetchError extends Error {
  constructor(
    readonly kind: 'unreachable' | 'too_large',
    message: string,
  ) {
    super(message);
  }
}

export interface GuardedFetchOptions {
  maxBytes: number;
  timeoutMs: number;
  allowPrivate: boolean;
  signal?: AbortSignal;
  /** Certificate authorities to trust instead of the system's (tests with a self-signed server). */
  ca?: string | Buffer;
}

const MAX_GUARDED_REDIRECTS = 3;

/**
 * GETs an `https` URL through the same guard as webhook deliveries: no loopback, private,
 * link-local or metadata address (literal or after DNS), at most 3 redirects, each checked the same
 * way (and https only), the body counted while it arrives and cut at `maxBytes` (a declared
 * Content-Length over it is refused before reading), `timeoutMs` for the whole exchange.
 */
export async function getGuarded(rawUrl: string, options: GuardedFetchOptions): Promise<Buffer> {
  const deadline = AbortSignal.any([AbortSignal.timeout(options.timeoutMs), ...(options.signal ? [options.signal] : [])]);
  let target = rawUrl;
  for (let hop = 0; ; hop += 1) {
    const problem = urlProblem(target, options.allowPrivate);
    if (problem) throw new GuardedFetchError('unreachable', `${target} ${problem}`);
    if (new URL(target).protocol !== 'https:') throw new GuardedFetchError('unreachable', `${target} is not an https URL`);
    const answer = await getOnce(target, options, deadline);
    if ('location' in answer) {
      if (hop >= MAX_GUARDED_REDIRECTS) throw new GuardedFetchError('unreachable', `${rawUrl} redirects more than ${MAX_GUARDED_REDIRECTS} times`);
      target = new URL(answer.location, target).toString();
      continue;
    }
    return answer.bytes;
  }
}

function getOnce(url: string, options: GuardedFetchOptions, signal: AbortSignal): Promise<{ bytes: Buffer } | { location: string }> {
  const timeoutMessage = `${url} did not answer within ${options.timeoutMs / 1000} s`;
  return new Promise((resolve, reject) => {
    const fail = (error: Error) => {
      if (error instanceof GuardedFetchError) return reject(error);
      const timedOut = error.name === 'AbortError' || error.name === 'TimeoutError';
      reject(new GuardedFetchError('unreachable', timedOut ? timeoutMessage : `${url} could not be fetched: ${error.message.slice(0, 300)}`));
    };
    const tls = options.ca ? { ca: options.ca } : {};
    const request = https.get(
      url,
      { lookup: guardedLookup(options.allowPrivate), signal, ...tls, headers: { 'user-agent': 'creative-gateway-image-inputs', accept: 'image/*' } },
      (response) => {
        const status = response.statusCode ?? 0;
        if (status >= 300 && status < 400 && response.headers.location) {
          response.resume();
          return resolve({ location: response.headers.location });
        }
        if (status !== 200) {
          response.resume();
          return fail(new GuardedFetchError('unreachable', `${url} answered HTTP ${status}`));
        }
        const tooLarge = () => new GuardedFetchError('too_large', `${url} is larger than ${options.maxBytes} bytes`);
        if (Number(response.headers['content-length'] ?? 0) > options.maxBytes) {
          response.destroy();
          return fail(tooLarge());
        }
        const chunks: Buffer[] = [];
        let total = 0;
        response.on('data', (chunk: Buffer) => {
          total += chunk.length;
          if (total > options.maxBytes) {
            response.destroy(tooLarge());
            return;
          }
          chunks.push(chunk);
        });
        response.on('end', () => resolve({ bytes: Buffer.concat(chunks, total) }));
        response.on('error', fail);
      },
    );
    request.on('error', fail);
  });
}

export interface PostResult {
  statusCode?: number;
  error?: string;
}

/** POSTs `body` with `headers`; no redirect is followed (a 3xx is a failure), `timeoutMs` for the whole exchange. */
export function postJson(
  rawUrl: string,
  headers: Record<string, string>,
  body: string,
  options: { timeoutMs: number; allowPrivate: boolean },
): Promise<PostResult> {
  const problem = urlProblem(rawUrl, options.allowPrivate);
  if (problem) return Promise.resolve({ error: `URL ${problem}` });
  const url = new URL(rawUrl);
  const lookup = guardedLookup(options.allowPrivate);
  return new Promise((resolve) => {
    const transport = url.protocol === 'https:' ? https : http;
    const request = transport.request(
      url,
      {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'creative-gateway-webhooks',
          ...headers,
          'content-length': String(Buffer.byteLength(body)),
        },
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
      resolve({
        error: error.name === 'AbortError' || error.name === 'TimeoutError' ? `no answer within ${options.timeoutMs / 1000} s` : error.message.slice(0, 300),
      });
    });
    request.end(body);
  });
}
