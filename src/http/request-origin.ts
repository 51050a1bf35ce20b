import type { CidrSet } from '../shared/cidr';

/** Where a request was sent: what a page or document served to it should point back at. */
export interface RequestOrigin {
  scheme: 'http' | 'https';
  /** `host[:port]`, as the client wrote it. */
  authority: string;
}

// A DNS name or IPv4 address, or a bracketed IPv6 literal, and an optional port: nothing that could
// break out of the JSON or HTML it is written into.
const AUTHORITY = /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}))*\.?|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

function authorityOf(value: string | undefined): string | undefined {
  const first = value?.split(',')[0]?.trim();
  return first !== undefined && first.length <= 261 && AUTHORITY.test(first) ? first : undefined;
}

function schemeOf(value: string | undefined): RequestOrigin['scheme'] | undefined {
  const first = value?.split(',')[0]?.trim().toLowerCase();
  return first === 'http' || first === 'https' ? first : undefined;
}

/**
 * The origin a request came to: its `Host`, over http (the gateway does not terminate TLS). From a
 * peer in TRUSTED_PROXIES, `X-Forwarded-Proto` and `X-Forwarded-Host` (their first, client-side
 * value) take precedence; from anyone else they are ignored. Undefined when the host is missing or
 * not a plain `host[:port]`.
 */
export function requestOrigin(
  request: { header(name: string): string | undefined; peer: string | undefined },
  trustedProxies: CidrSet | undefined,
): RequestOrigin | undefined {
  const proxied = trustedProxies !== undefined && request.peer !== undefined && trustedProxies.has(request.peer);
  const authority = (proxied ? authorityOf(request.header('x-forwarded-host')) : undefined) ?? authorityOf(request.header('host'));
  if (authority === undefined) return undefined;
  return { scheme: (proxied ? schemeOf(request.header('x-forwarded-proto')) : undefined) ?? 'http', authority };
}

/** The request headers a response built from requestOrigin() depends on, for `Vary`. */
export function originVary(trustedProxies: CidrSet | undefined): string {
  return trustedProxies === undefined ? 'Host' : 'Host, X-Forwarded-Host, X-Forwarded-Proto';
}
