import { randomBytes } from 'node:crypto';
import { isIP, type LookupFunction } from 'node:net';
import { Agent, type Dispatcher } from 'undici';
import { BLOCKED_ADDRESS_CODE, guardedLookup, isBlockedAddress } from '../shared/safe-url';

/**
 * The upstream hop: one process-wide undici Agent (a keep-alive pool per origin, no cap on connections:
 * each generation in flight holds one, and the channel limits cap them), driven through its dispatch
 * API so that an answer is collected as raw chunks and parsed once, with no Response/stream objects.
 *
 * The connect phase has its own timeout (UPSTREAM_CONNECT_TIMEOUT_MS), shorter than any attempt's
 * deadline, so that "never reached" is told apart from "sent and no answer": only the first may go to
 * another channel (docs/operators/channels.md).
 */
let connectTimeoutMs = 3000;
let keepAliveMs = 10_000;
let agent: Agent | undefined;
/** The pool of calls that may reach public addresses only (API channels without CHANNEL_ALLOW_PRIVATE_UPSTREAMS). */
let publicAgent: Agent | undefined;

/** Set from configuration at startup; the next call uses a new Agent (the old one closes when idle). */
export function configureUpstreamHttp(settings: { connectTimeoutMs: number; keepAliveMs: number }): void {
  if (settings.connectTimeoutMs === connectTimeoutMs && settings.keepAliveMs === keepAliveMs && agent) return;
  connectTimeoutMs = settings.connectTimeoutMs;
  keepAliveMs = settings.keepAliveMs;
  const previous = [agent, publicAgent];
  agent = undefined;
  publicAgent = undefined;
  for (const old of previous) void old?.close().catch(() => undefined);
}

/**
 * Each pool connects through the guarded lookup (safe-url.ts): the public one refuses loopback and
 * private addresses too, both refuse link-local and metadata ones. The check is on the address
 * connected to, so a name that resolved to a public address when the channel was saved and points
 * inside now is refused too (docs/operators/channels.md).
 */
function dispatcher(publicOnly: boolean): Agent {
  if (publicOnly) {
    publicAgent ??= newAgent(guardedLookup(false));
    return publicAgent;
  }
  agent ??= newAgent(guardedLookup(true));
  return agent;
}

function newAgent(lookup: LookupFunction): Agent {
  return new Agent({
    connect: { timeout: connectTimeoutMs, lookup },
    // An idle connection closes after keepAliveMs, whatever the upstream's Keep-Alive hint allows: after a burst
    // of slow generations (one connection each) the sockets and their memory go back (BENCHMARKS.md, target 4).
    keepAliveTimeout: keepAliveMs,
    keepAliveMaxTimeout: keepAliveMs,
    // Long generations: no headers/body timeouts of undici's own; each attempt's AbortSignal bounds the call.
    headersTimeout: 0,
    bodyTimeout: 0,
  });
}

export interface UpstreamAnswer {
  status: number;
  /** Header values as sent (lower-case names). */
  readonly headers: Record<string, string | string[] | undefined>;
  /** The first value of one header (`name` in lower case), as `headers[name]` holds it. */
  header(name: string): string | undefined;
  body: Buffer;
}

/** An answer whose headers are decoded on first read: most callers read one header at most, many none. */
class Answer implements UpstreamAnswer {
  private decoded: Record<string, string | string[] | undefined> | undefined;

  constructor(
    readonly status: number,
    private readonly rawHeaders: Buffer[] | string[] | null,
    readonly body: Buffer,
  ) {}

  get headers(): Record<string, string | string[] | undefined> {
    this.decoded ??= parseHeaders(this.rawHeaders);
    return this.decoded;
  }

  header(name: string): string | undefined {
    return this.decoded ? first(this.decoded[name]) : rawHeader(this.rawHeaders, name);
  }
}

const first = (value: string | string[] | undefined): string | undefined => (Array.isArray(value) ? value[0] : value);

/** The first value of header `name` (lower case) among raw name/value pairs, without decoding the others. */
function rawHeader(raw: Buffer[] | string[] | null, name: string): string | undefined {
  if (!raw) return undefined;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const key = raw[i]!;
    if (key.length === name.length && key.toString('latin1').toLowerCase() === name) return raw[i + 1]!.toString('latin1');
  }
  return undefined;
}

/** Why a call failed, and whether the request could have reached the upstream at all. */
export class UpstreamHttpError extends Error {
  constructor(
    message: string,
    /** The system or undici error code (ECONNREFUSED, UND_ERR_CONNECT_TIMEOUT, ECONNRESET, ...). */
    readonly code: string | undefined,
    /** True when no byte of the request was written to the upstream: it cannot have accepted it. */
    readonly neverSent: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

/**
 * POSTs `body` to `url` and resolves with the whole answer. Rejects with the signal's reason when aborted.
 * `publicOnly`: connect to public addresses only; link-local and metadata addresses are refused whatever it
 * says (safe-url.ts). A literal address never reaches the lookup, so it is checked here.
 * The content type is JSON unless `headers` names another (`content-type`, lower case).
 */
export function post(
  url: URL,
  body: string | Buffer,
  headers: Record<string, string>,
  signal: AbortSignal,
  publicOnly = false,
  onSent?: () => void,
): Promise<UpstreamAnswer> {
  return send('POST', url, body, headers, signal, publicOnly, onSent);
}

/** As post, with any method; a call without `body` (GET, a bodiless PUT) sends no content type. */
export function send(
  method: 'GET' | 'POST' | 'PUT',
  url: URL,
  body: string | Buffer | undefined,
  headers: Record<string, string>,
  signal: AbortSignal,
  publicOnly = false,
  onSent?: () => void,
): Promise<UpstreamAnswer> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const literal = url.hostname.replace(/^\[|\]$/g, '');
    if (isIP(literal) !== 0 && isBlockedAddress(literal, !publicOnly)) {
      reject(new UpstreamHttpError(`${literal} is a blocked address`, BLOCKED_ADDRESS_CODE, true));
      return;
    }
    let requestSent = false;
    const sent = () => {
      if (requestSent) return;
      requestSent = true;
      onSent?.();
    };
    let abortCall: ((reason?: Error) => void) | undefined;
    let settled = false;
    let status = 0;
    let responseHeaders: Buffer[] | string[] | null = null;
    const chunks: Buffer[] = [];
    let size = 0;
    const onAbort = () => abortCall?.(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    const finish = (error: unknown, answer?: UpstreamAnswer) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      if (answer) resolve(answer);
      else reject(error);
    };
    const handler: Dispatcher.DispatchHandler = {
      onConnect(abort) {
        abortCall = abort;
        if (signal.aborted) abort(signal.reason as Error);
      },
      onRequestSent() {
        sent();
      },
      onBodySent() {
        sent();
      },
      onHeaders(statusCode, rawHeaders) {
        // The upstream answered, so it read the request line at least.
        sent();
        status = statusCode;
        responseHeaders = rawHeaders;
        return true;
      },
      onData(chunk) {
        size += chunk.length;
        if (size > MAX_ANSWER_BYTES) {
          abortCall?.(new UpstreamHttpError(`answer larger than ${MAX_ANSWER_BYTES} bytes`, 'ANSWER_TOO_LARGE', false));
          return false;
        }
        chunks.push(chunk);
        return true;
      },
      onComplete() {
        finish(undefined, new Answer(status, responseHeaders, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)));
      },
      onError(error) {
        if (signal.aborted) return finish(signal.reason);
        if (error instanceof UpstreamHttpError) return finish(error);
        const code = errorCode(error);
        finish(new UpstreamHttpError(error.message, code, !requestSent, { cause: error }));
      },
    } as Dispatcher.DispatchHandler;
    dispatcher(publicOnly).dispatch(
      {
        origin: url.origin,
        path: url.pathname + url.search,
        method,
        ...(body === undefined ? { headers } : { body, headers: { 'content-type': 'application/json', ...headers } }),
      },
      handler,
    );
  });
}

/** One part of a multipart/form-data body: a text field, or a file when it has a `filename`. */
export interface MultipartPart {
  name: string;
  value: string | Buffer;
  filename?: string;
  contentType?: string;
}

/**
 * A multipart/form-data body (RFC 7578) and its content type. The boundary is random and long, so
 * no part's bytes can contain it by chance; names and filenames are the caller's own, quoted as is.
 */
export function encodeMultipart(parts: readonly MultipartPart[]): { body: Buffer; contentType: string } {
  const boundary = `----gateway-${randomBytes(16).toString('hex')}`;
  const chunks: Buffer[] = [];
  for (const part of parts) {
    const disposition = `form-data; name="${part.name}"${part.filename === undefined ? '' : `; filename="${part.filename}"`}`;
    const type = part.contentType === undefined ? '' : `\r\nContent-Type: ${part.contentType}`;
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}${type}\r\n\r\n`, 'utf8'));
    chunks.push(typeof part.value === 'string' ? Buffer.from(part.value, 'utf8') : part.value);
    chunks.push(Buffer.from('\r\n', 'utf8'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`, 'utf8'));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

function errorCode(error: Error): string | undefined {
  const own = (error as { code?: unknown }).code;
  if (typeof own === 'string' && own !== 'UND_ERR_SOCKET') return own;
  const cause = (error as { cause?: { code?: unknown } }).cause;
  if (typeof cause?.code === 'string') return cause.code;
  return typeof own === 'string' ? own : undefined;
}

function parseHeaders(raw: Buffer[] | string[] | null): Record<string, string | string[] | undefined> {
  const headers: Record<string, string | string[] | undefined> = {};
  if (!raw) return headers;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toString('latin1').toLowerCase();
    const value = raw[i + 1]!.toString('latin1');
    const existing = headers[name];
    headers[name] = existing === undefined ? value : Array.isArray(existing) ? [...existing, value] : [existing, value];
  }
  return headers;
}
