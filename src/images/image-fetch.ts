import { ApiError } from '../errors/api-error';

/**
 * Host patterns an upstream's images may come from: exact host names (`img.example.com`, with a
 * port when not the default: `127.0.0.1:9000`) or one leading wildcard label (`*.volces.com`,
 * which matches subdomains, not `volces.com` itself).
 */
export class HostAllowList {
  private readonly exact = new Set<string>();
  private readonly suffixes: string[] = [];

  constructor(patterns: Iterable<string>) {
    for (const raw of patterns) {
      const pattern = raw.trim().toLowerCase();
      if (pattern.startsWith('*.')) this.suffixes.push(pattern.slice(1));
      else if (pattern) this.exact.add(pattern);
    }
  }

  /** `url.host` (host[:port], lower case, as WHATWG URL gives it). */
  allows(host: string): boolean {
    return this.exact.has(host) || this.suffixes.some((suffix) => host.endsWith(suffix) && !host.includes(':'));
  }

  /** This list plus one exact host. */
  with(host: string): HostAllowList {
    return new HostAllowList([...this.exact, ...this.suffixes.map((s) => `*${s}`), host]);
  }

  describe(): string {
    return [...this.exact, ...this.suffixes.map((s) => `*${s}`)].join(', ') || '(none)';
  }
}

export interface FetchLimits {
  maxBytes: number;
  timeoutMs: number;
}

const MAX_REDIRECTS = 3;

/**
 * Downloads one upstream image URL, only from `allowed` hosts (every redirect hop is checked the
 * same way and never followed elsewhere), over http(s), within `maxBytes` and `timeoutMs`.
 * Throws ApiError provider_error (502) for anything the upstream got wrong; the caller sniffs the type.
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
    if (target.protocol !== 'https:' && target.protocol !== 'http:') throw refuse(`its URL scheme ${target.protocol} is not http(s)`);
    if (!allowed.allows(target.host)) throw refuse(`host ${target.host} is not one of the provider's image hosts (${allowed.describe()})`);
    let answer: Response;
    try {
      answer = await fetch(target, { redirect: 'manual', signal: deadline, headers: { Accept: 'image/png, image/jpeg, image/webp' } });
    } catch (error) {
      signal.throwIfAborted();
      throw refuse(
        `downloading it failed (${(error as Error).name === 'TimeoutError' ? `no answer within ${limits.timeoutMs} ms` : (error as Error).message})`,
      );
    }
    if (answer.status >= 300 && answer.status < 400 && answer.headers.has('location')) {
      await answer.body?.cancel();
      if (hop >= MAX_REDIRECTS) throw refuse(`more than ${MAX_REDIRECTS} redirects`);
      target = new URL(answer.headers.get('location') as string, target);
      continue;
    }
    if (answer.status !== 200) {
      await answer.body?.cancel();
      throw refuse(`its URL answered HTTP ${answer.status}`);
    }
    const declared = Number(answer.headers.get('content-length') ?? Number.NaN);
    if (declared > limits.maxBytes) {
      await answer.body?.cancel();
      throw refuse(`it is larger than ${limits.maxBytes} bytes`);
    }
    return readBounded(answer, limits.maxBytes, () => refuse(`it is larger than ${limits.maxBytes} bytes`));
  }
}

/** Reads a body but stops (and cancels the download) as soon as it passes `maxBytes`. */
async function readBounded(answer: Response, maxBytes: number, tooLarge: () => Error): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  if (!answer.body) return Buffer.alloc(0);
  const reader = answer.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel();
      throw tooLarge();
    }
    chunks.push(Buffer.from(value));
  }
  return Buffer.concat(chunks, total);
}
