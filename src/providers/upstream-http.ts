import { randomBytes } from 'node:crypto';
import type { Dispatcher } from 'undici';
import { configureOutbound, errorCode, outboundDispatcher, outboundOrigin } from '../shared/outbound';
import { injectTraceContext, tracingEnabled, withSpan } from '../telemetry/tracing';

/**
 * The upstream hop: the process-wide guarded agents (shared/outbound.ts: a keep-alive pool per origin,
 * no cap on connections: each generation in flight holds one, and the channel limits cap them), driven
 * through undici's dispatch API so that an answer is collected as raw chunks and parsed once, with no
 * Response/stream objects.
 *
 * The connect phase has its own timeout (UPSTREAM_CONNECT_TIMEOUT_MS), shorter than any attempt's
 * deadline, so that "never reached" is told apart from "sent and no answer": only the first may go to
 * another channel (docs/operators/channels.md). The connector checks the address connected to, so a
 * name that resolved to a public address when the channel was saved and points inside now is refused
 * too (docs/operators/channels.md).
 */
export function configureUpstreamHttp(settings: { connectTimeoutMs: number; keepAliveMs: number }): void {
  configureOutbound(settings);
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
 * `publicOnly`: connect to public addresses only; link-local, metadata and NAT64 addresses are refused whatever
 * it says (shared/outbound.ts).
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
  if (!tracingEnabled()) return dispatchCall(method, url, body, headers, signal, publicOnly, onSent);
  // A client span per call, its traceparent sent to the upstream (docs/operators/production.md, "Traces").
  const attributes = { 'http.request.method': method, 'server.address': url.hostname, 'url.scheme': url.protocol.replace(':', '') };
  return withSpan(
    method,
    url.port === '' ? attributes : { ...attributes, 'server.port': Number(url.port) },
    async (span) => {
      const traced = { ...headers };
      injectTraceContext(traced);
      const answer = await dispatchCall(method, url, body, traced, signal, publicOnly, onSent);
      span.set({ 'http.response.status_code': answer.status });
      if (answer.status >= 400) span.fail(String(answer.status));
      return answer;
    },
    { kind: 'client' },
  );
}

function dispatchCall(
  method: 'GET' | 'POST' | 'PUT',
  url: URL,
  body: string | Buffer | undefined,
  headers: Record<string, string>,
  signal: AbortSignal,
  publicOnly: boolean,
  onSent: (() => void) | undefined,
): Promise<UpstreamAnswer> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
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
    outboundDispatcher({ allowPrivate: !publicOnly }).dispatch(
      {
        origin: outboundOrigin(url),
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
