import dns from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { Agent, buildConnector, type Dispatcher, request } from 'undici';
import { isBlockedAddress, urlProblem } from './safe-url';

/**
 * The one way out of the gateway: upstream API calls (providers/upstream-http.ts), result downloads
 * (images/image-fetch.ts), image inputs fetched from URLs, webhook deliveries and moderation hooks all
 * connect through the agents made here. Each agent's connector checks the address it is about to
 * connect to: a literal address before connecting, a name through a DNS lookup that refuses blocked
 * answers (safe-url.ts isBlockedAddress), so a name that resolved to a public address when it was
 * checked and resolves to an internal one now (DNS rebinding, TTL 0) is refused at the connection
 * itself. An answer that lists a blocked address among public ones is refused whole: the socket would
 * try the next address when the first fails.
 *
 * Whether private addresses are allowed is the setting of the kind of call (CHANNEL_ALLOW_PRIVATE_UPSTREAMS
 * for API channels and result downloads, WEBHOOK_ALLOW_PRIVATE_NETWORKS for webhooks and moderation
 * hooks, the operator's own environment accounts always): each policy has its own pool, so a connection
 * opened where private addresses are allowed is never reused by a call where they are not. Link-local,
 * metadata and NAT64 addresses are refused under every policy.
 */
export interface OutboundPolicy {
  /** Loopback and private addresses may be connected to. */
  allowPrivate: boolean;
  /** Certificate authorities to trust instead of the system's (tests' self-signed servers). */
  ca?: string | Buffer;
}

/** The `code` of the error a connection to a blocked address fails with. */
export const BLOCKED_ADDRESS_CODE = 'EBLOCKEDADDRESS';

let connectTimeoutMs = 3000;
let keepAliveMs = 10_000;
/** Per policy: private addresses allowed or not, and per CA (tests) by identity. */
const agents = new Map<string | Buffer | undefined, Map<boolean, Dispatcher>>();
/** Tests only: the origin a request for a URL really goes to (a local fake standing in for a CDN host); the guard checks that address as any other. */
let testRoute: ((url: URL) => string | undefined) | undefined;

/**
 * UPSTREAM_CONNECT_TIMEOUT_MS (the connect phase, shorter than any call's deadline, so "never reached"
 * is told apart from "sent and no answer") and UPSTREAM_KEEP_ALIVE_MS (how long an idle connection is
 * kept, whatever the peer's Keep-Alive hint allows). Set at startup; the next call uses new agents, the
 * old ones close when idle.
 */
export function configureOutbound(settings: { connectTimeoutMs: number; keepAliveMs: number }): void {
  if (settings.connectTimeoutMs === connectTimeoutMs && settings.keepAliveMs === keepAliveMs && agents.size > 0) return;
  connectTimeoutMs = settings.connectTimeoutMs;
  keepAliveMs = settings.keepAliveMs;
  const previous = [...agents.values()].flatMap((byPolicy) => [...byPolicy.values()]);
  agents.clear();
  for (const old of previous) void old.close().catch(() => undefined);
}

/** Tests only: the certificate authority trusted where a call names none (a test's self-signed https server). */
let testCa: string | Buffer | undefined;

/** Tests only: trust `ca` instead of the system's authorities where a call names none (undefined: the system's again). */
export function trustOutboundCaForTests(ca: string | Buffer | undefined): void {
  testCa = ca;
}

/** Tests only: send requests for some URLs to a local server's origin instead (undefined: no route). */
export function routeOutboundForTests(route: ((url: URL) => string | undefined) | undefined): void {
  testRoute = route;
}

/** The origin a request for `url` connects to: its own, unless a test routed it elsewhere. */
export function outboundOrigin(url: URL): string {
  return testRoute?.(url) ?? url.origin;
}

/** The agent of `policy`: a keep-alive pool per origin, no timeouts of undici's own (each call's signal bounds it). */
export function outboundDispatcher(policy: OutboundPolicy): Dispatcher {
  const ca = policy.ca ?? testCa;
  let byPolicy = agents.get(ca);
  if (!byPolicy) {
    byPolicy = new Map();
    agents.set(ca, byPolicy);
  }
  let agent = byPolicy.get(policy.allowPrivate);
  if (!agent) {
    agent = new Agent({
      connect: guardedConnector({ allowPrivate: policy.allowPrivate, ...(ca ? { ca } : {}) }),
      // An idle connection closes after keepAliveMs: after a burst of slow generations (one connection each) the
      // sockets and their memory go back (BENCHMARKS.md, target 4).
      keepAliveTimeout: keepAliveMs,
      keepAliveMaxTimeout: keepAliveMs,
      headersTimeout: 0,
      bodyTimeout: 0,
    });
    byPolicy.set(policy.allowPrivate, agent);
  }
  return agent;
}

function blocked(message: string): Error {
  return Object.assign(new Error(message), { code: BLOCKED_ADDRESS_CODE });
}

/** undici's connector with the address check: literal addresses here, names in the lookup. */
function guardedConnector(policy: OutboundPolicy): buildConnector.connector {
  const connect = buildConnector({ timeout: connectTimeoutMs, lookup: guardedLookup(policy.allowPrivate), ...(policy.ca ? { ca: policy.ca } : {}) });
  return (options, callback) => {
    const literal = options.hostname.replace(/^\[|\]$/g, '');
    if (isIP(literal) !== 0 && isBlockedAddress(literal, policy.allowPrivate)) {
      callback(blocked(`${literal} is a blocked address`), null);
      return;
    }
    connect(options, callback);
  };
}

/**
 * A DNS lookup that refuses a name any of whose addresses is blocked (with `allowPrivate`, only
 * link-local, metadata and NAT64 ones). `dns.lookup` is read at each call: tests stand in for the
 * machine's resolver there.
 */
export function guardedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, lookupOptions, callback) => {
    dns.lookup(hostname, { ...lookupOptions, all: true }, (error, addresses) => {
      if (error) return callback(error, '', 0);
      const list = addresses as dns.LookupAddress[];
      const refused = list.find((a) => isBlockedAddress(a.address, allowPrivate));
      if (refused) return callback(blocked(`${hostname} resolves to a blocked address (${refused.address})`), '', 0);
      if (lookupOptions.all) return callback(null, list as never, 0);
      const first = list[0];
      if (!first) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '', 0);
      return callback(null, first.address, first.family);
    });
  };
}

/** Why an outbound call failed: a blocked address, a body over its bound, the signal, or anything else on the way. */
export class OutboundError extends Error {
  constructor(
    readonly kind: 'blocked' | 'too_large' | 'aborted' | 'failed',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export interface OutboundCall {
  method: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string | Buffer;
  policy: OutboundPolicy;
  /** Bounds the whole exchange, the body's reading included. */
  signal: AbortSignal;
  /**
   * The largest body read: a larger declared Content-Length is refused before reading, a longer body is
   * cut while it arrives (too_large). With `discardBody`, up to this much is drained and the rest dropped.
   */
  maxBytes: number;
  /** Only the status matters (webhooks): the body is drained up to maxBytes, not kept. */
  discardBody?: boolean;
}

export interface OutboundAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

const EMPTY = Buffer.alloc(0);

/** One request through the guarded agent of `call.policy`; no redirect is followed (a 3xx is answered as it is). */
export async function outboundRequest(url: URL, call: OutboundCall): Promise<OutboundAnswer> {
  const { signal, maxBytes } = call;
  let response: Dispatcher.ResponseData;
  try {
    const origin = outboundOrigin(url);
    response = await request(origin === url.origin ? url : new URL(`${url.pathname}${url.search}`, origin), {
      method: call.method,
      headers: call.headers ?? {},
      ...(call.body === undefined ? {} : { body: call.body }),
      signal,
      dispatcher: outboundDispatcher(call.policy),
    });
  } catch (error) {
    throw outboundError(error, signal);
  }
  const { statusCode, headers, body } = response;
  if (call.discardBody) {
    try {
      await body.dump({ limit: maxBytes });
    } catch {
      // The status is what was asked for; a body cut short changes nothing.
    }
    return { status: statusCode, headers, body: EMPTY };
  }
  const tooLarge = () => new OutboundError('too_large', `${url.href} is larger than ${maxBytes} bytes`);
  if (Number(headers['content-length'] ?? 0) > maxBytes) {
    body.destroy();
    throw tooLarge();
  }
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      total += chunk.length;
      if (total > maxBytes) {
        body.destroy();
        throw tooLarge();
      }
      chunks.push(chunk);
    }
  } catch (error) {
    throw error instanceof OutboundError ? error : outboundError(error, signal);
  }
  return { status: statusCode, headers, body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total) };
}

function outboundError(error: unknown, signal: AbortSignal): OutboundError {
  if (signal.aborted) return new OutboundError('aborted', 'aborted', { cause: error });
  const code = errorCode(error);
  const message = (error as Error).message ?? String(error);
  return new OutboundError(code === BLOCKED_ADDRESS_CODE ? 'blocked' : 'failed', message, { cause: error });
}

/** The system or undici code of a failed call (the cause's, when undici wraps a socket error). */
export function errorCode(error: unknown): string | undefined {
  const own = (error as { code?: unknown }).code;
  if (typeof own === 'string' && own !== 'UND_ERR_SOCKET') return own;
  const cause = (error as { cause?: { code?: unknown } }).cause;
  if (typeof cause?.code === 'string') return cause.code;
  return typeof own === 'string' ? own : undefined;
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
 * GETs an `https` URL (image inputs): no loopback, private, link-local or metadata address (literal or
 * at connect time), at most 3 redirects, each checked the same way (and https only), the body counted
 * while it arrives and cut at `maxBytes`, `timeoutMs` for the whole exchange.
 */
export async function getGuarded(rawUrl: string, options: GuardedFetchOptions): Promise<Buffer> {
  const deadline = AbortSignal.any([AbortSignal.timeout(options.timeoutMs), ...(options.signal ? [options.signal] : [])]);
  const policy: OutboundPolicy = { allowPrivate: options.allowPrivate, ...(options.ca ? { ca: options.ca } : {}) };
  let target = rawUrl;
  for (let hop = 0; ; hop += 1) {
    const problem = urlProblem(target, options.allowPrivate);
    if (problem) throw new GuardedFetchError('unreachable', `${target} ${problem}`);
    if (new URL(target).protocol !== 'https:') throw new GuardedFetchError('unreachable', `${target} is not an https URL`);
    let answer: OutboundAnswer;
    try {
      answer = await outboundRequest(new URL(target), {
        method: 'GET',
        headers: { 'user-agent': 'creative-gateway-image-inputs', accept: 'image/*' },
        policy,
        signal: deadline,
        maxBytes: options.maxBytes,
      });
    } catch (error) {
      const failure = error as OutboundError;
      if (failure.kind === 'too_large') throw new GuardedFetchError('too_large', failure.message);
      if (failure.kind === 'aborted') throw new GuardedFetchError('unreachable', `${target} did not answer within ${options.timeoutMs / 1000} s`);
      throw new GuardedFetchError('unreachable', `${target} could not be fetched: ${failure.message.slice(0, 300)}`);
    }
    const location = answer.headers.location;
    if (answer.status >= 300 && answer.status < 400 && typeof location === 'string') {
      if (hop >= MAX_GUARDED_REDIRECTS) throw new GuardedFetchError('unreachable', `${rawUrl} redirects more than ${MAX_GUARDED_REDIRECTS} times`);
      target = new URL(location, target).toString();
      continue;
    }
    if (answer.status !== 200) throw new GuardedFetchError('unreachable', `${target} answered HTTP ${answer.status}`);
    return answer.body;
  }
}

export interface PostResult {
  statusCode?: number;
  error?: string;
}

/** What a webhook receiver's answer is read for: its status; this much of its body is drained, the rest dropped. */
const DRAINED_ANSWER_BYTES = 64 * 1024;

/** POSTs `body` with `headers` (webhooks); no redirect is followed (a 3xx is a failure), `timeoutMs` for the whole exchange. */
export async function postJson(
  rawUrl: string,
  headers: Record<string, string>,
  body: string,
  options: { timeoutMs: number; allowPrivate: boolean },
): Promise<PostResult> {
  const problem = urlProblem(rawUrl, options.allowPrivate);
  if (problem) return { error: `URL ${problem}` };
  try {
    const answer = await outboundRequest(new URL(rawUrl), {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': 'creative-gateway-webhooks', ...headers },
      body,
      policy: { allowPrivate: options.allowPrivate },
      signal: AbortSignal.timeout(options.timeoutMs),
      maxBytes: DRAINED_ANSWER_BYTES,
      discardBody: true,
    });
    return { statusCode: answer.status };
  } catch (error) {
    const failure = error as OutboundError;
    return { error: failure.kind === 'aborted' ? `no answer within ${options.timeoutMs / 1000} s` : failure.message.slice(0, 300) };
  }
}
