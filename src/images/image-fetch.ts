import { ApiError } from '../errors/api-error';
import { type OutboundAnswer, type OutboundError, outboundRequest } from '../shared/outbound';

/**
 * Host patterns an upstream's images may come from, over https only: exact host names
 * (`img.example.com`, with a port when not the default: `img.example.com:8443`) or one leading
 * wildcard label (`*.volces.com`, which matches subdomains on the default port, not `volces.com`
 * itself). The account's own host (`with`) is the exception: it is where the operator pointed the
 * account, so it keeps the base URL's scheme, http included (a self-hosted upstream, a fake).
 */
export class HostAllowList {
  private readonly exact = new Set<string>();
  private readonly suffixes: string[] = [];

  constructor(
    patterns: Iterable<string>,
    /** Hosts (host[:port]) allowed over http too: the accounts' own. */
    private readonly ownHosts: ReadonlySet<string> = new Set(),
  ) {
    for (const raw of patterns) {
      const pattern = raw.trim().toLowerCase();
      if (pattern.startsWith('*.')) this.suffixes.push(pattern.slice(1));
      else if (pattern) this.exact.add(pattern);
    }
  }

  /** `host` as `url.host` gives it (host[:port], lower case), reached over `protocol`. */
  allows(host: string, protocol = 'https:'): boolean {
    if (this.ownHosts.has(host)) return protocol === 'https:' || protocol === 'http:';
    return protocol === 'https:' && (this.exact.has(host) || this.suffixes.some((suffix) => host.endsWith(suffix) && !host.includes(':')));
  }

  /** This list plus one account's own host, over http or https. */
  with(host: string): HostAllowList {
    return new HostAllowList([...this.exact, ...this.suffixes.map((s) => `*${s}`)], new Set([...this.ownHosts, host]));
  }

  describe(): string {
    return [...this.exact, ...this.suffixes.map((s) => `*${s}`), ...this.ownHosts].join(', ') || '(none)';
  }
}

export interface FetchLimits {
  maxBytes: number;
  timeoutMs: number;
  /**
   * CHANNEL_ALLOW_PRIVATE_UPSTREAMS: a result may be downloaded from a loopback or private address. Without it
   * only public addresses are connected to, whatever the host's name resolves to at that moment.
   */
  allowPrivate: boolean;
}

const MAX_REDIRECTS = 3;

/**
 * Downloads one upstream image URL, only from `allowed` hosts (every redirect hop is checked the
 * same way and never followed elsewhere), within `maxBytes` and `timeoutMs`, through the guarded
 * outbound agent (shared/outbound.ts: the address connected to is checked, so a name that resolves
 * to an internal address is never reached). Throws ApiError provider_error (502) for anything the
 * upstream got wrong, a deadline passed while the body was still arriving included; the signal's
 * own reason when the request was aborted. The caller sniffs the type.
 */
export async function fetchUpstreamImage(provider: string, url: string, allowed: HostAllowList, limits: FetchLimits, signal: AbortSignal): Promise<Buffer> {
  const refuse = (why: string) => new ApiError('provider_error', `Provider ${provider} returned an image the gateway could not take: ${why}.`);
  const deadline = AbortSignal.any([signal, AbortSignal.timeout(limits.timeoutMs)]);
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    throw refuse('its URL is not a URL');
  }
  for (let hop = 0; ; hop += 1) {
    if (target.protocol !== 'https:' && target.protocol !== 'http:') throw refuse(`its URL scheme ${target.protocol} is not https`);
    if (!allowed.allows(target.host)) throw refuse(`host ${target.host} is not one of the provider's image hosts (${allowed.describe()})`);
    if (!allowed.allows(target.host, target.protocol))
      throw refuse(`its URL is ${target.protocol.slice(0, -1)}: the provider's image hosts are taken over https only`);
    if (target.username !== '' || target.password !== '') throw refuse('its URL carries credentials');
    let answer: OutboundAnswer;
    try {
      answer = await outboundRequest(target, {
        method: 'GET',
        headers: { accept: 'image/png, image/jpeg, image/webp' },
        policy: { allowPrivate: limits.allowPrivate },
        signal: deadline,
        maxBytes: limits.maxBytes,
      });
    } catch (error) {
      signal.throwIfAborted();
      const failure = error as OutboundError;
      if (failure.kind === 'too_large') throw refuse(`it is larger than ${limits.maxBytes} bytes`);
      if (failure.kind === 'aborted') throw refuse(`downloading it took longer than ${limits.timeoutMs} ms`);
      throw refuse(`downloading it failed (${failure.message})`);
    }
    const location = answer.headers.location;
    if (answer.status >= 300 && answer.status < 400 && typeof location === 'string') {
      if (hop >= MAX_REDIRECTS) throw refuse(`more than ${MAX_REDIRECTS} redirects`);
      target = new URL(location, target);
      continue;
    }
    if (answer.status !== 200) throw refuse(`its URL answered HTTP ${answer.status}`);
    return answer.body;
  }
}
