import { ApiError, type ApiErrorOptions } from '../errors/api-error';
import type { ErrorCode } from '../errors/error-codes';
import { redactUpstreamText } from './redaction';
import { encodeMultipart, type MultipartPart, send, type UpstreamAnswer, UpstreamHttpError } from './upstream-http';

/**
 * The credentials of every upstream account this process holds (API channels and the environment's
 * accounts), registered by the transports that sign with them. Every UpstreamError's text is
 * redacted against all of them, so an upstream echoing any account's key never reaches a client, the
 * database or a log. Kept for the process's life: a replaced key is still worth hiding.
 */
const accountSecrets = new Set<string>();

export function registerAccountSecrets(...secrets: string[]): void {
  for (const secret of secrets) accountSecrets.add(secret);
}

/** What a failure says about where the request may go next (see docs/operators/channels.md). */
export interface UpstreamFailureTraits {
  /**
   * True only when the upstream cannot have accepted (and billed) the request: it answered with a
   * refusal (busy, 5xx other than 504/524, an account error) or was never reached (connection
   * refused, unknown host). Only such failures are sent to another channel.
   */
  safeElsewhere?: boolean;
  /** The upstream's Retry-After, for a busy answer. */
  retryAfterMs?: number;
  /** The account itself is unusable (revoked credentials, no balance): why, for `disabled_reason`. */
  accountProblem?: string;
  /** The upstream's HTTP status with an account problem (for the channel.auto_disabled event). */
  statusCode?: number;
  /**
   * The channel's configuration does not fit the request (model not open on the account, unknown
   * endpoint): why. Safe elsewhere, and not the provider's failure: it does not feed the breaker.
   */
  configurationProblem?: string;
}

/** Longest upstream text kept uncut for `withoutPrompt` (a prompt is at most 32,000 characters). */
const MAX_TOLD_TEXT = 64 * 1024;

/**
 * What each error's upstream said, account secrets out but not yet cut, for `withoutPrompt` to remove
 * the prompt from before cutting. Beside the error, not on it: nothing that serializes or logs an
 * error sees it.
 */
const told = new WeakMap<UpstreamError, { message: string; accountProblem?: string; configurationProblem?: string }>();

/**
 * A failure reported by (or about) an upstream. `retryable` marks the ones worth another try
 * (the upstream said it is busy); `countsAgainstProvider` feeds the circuit breaker (content
 * refusals are the caller's doing, not the provider's).
 *
 * This is where upstream text enters the gateway: the message and `accountProblem` are redacted
 * (account secrets, credential shapes) and bounded here, before the stack is captured, so every
 * outlet (answers, stored generations, `disabled_reason`, testChannel, logs) gets the redacted text.
 */
export class UpstreamError extends ApiError {
  readonly traits: UpstreamFailureTraits;

  constructor(
    code: ErrorCode,
    message: string,
    readonly retryable = false,
    options: ApiErrorOptions & UpstreamFailureTraits = {},
  ) {
    super(code, redactUpstreamText(message, accountSecrets), options);
    const uncut = (text: string) => redactUpstreamText(text, accountSecrets, { maxLength: MAX_TOLD_TEXT });
    told.set(this, {
      message: uncut(message),
      accountProblem: options.accountProblem === undefined ? undefined : uncut(options.accountProblem),
      configurationProblem: options.configurationProblem === undefined ? undefined : uncut(options.configurationProblem),
    });
    this.traits = {
      safeElsewhere: options.safeElsewhere ?? retryable,
      retryAfterMs: options.retryAfterMs,
      accountProblem: options.accountProblem === undefined ? undefined : redactUpstreamText(options.accountProblem, accountSecrets),
      statusCode: options.statusCode,
      configurationProblem: options.configurationProblem === undefined ? undefined : redactUpstreamText(options.configurationProblem, accountSecrets),
    };
  }

  get countsAgainstProvider(): boolean {
    if (this.traits.configurationProblem !== undefined) return false;
    return this.code === 'provider_error' || this.code === 'provider_busy' || this.code === 'provider_timeout';
  }
}

export const upstream = {
  busy: (provider: string, detail: string, retryAfterMs?: number) =>
    new UpstreamError('provider_busy', `Provider ${provider} is busy: ${detail}`, true, { retryAfterMs }),
  failed: (provider: string, detail: string, traits: UpstreamFailureTraits = {}) =>
    new UpstreamError('provider_error', `Provider ${provider} failed: ${detail}`, false, traits),
  contentRefused: (provider: string, detail: string) =>
    new UpstreamError('content_policy_violation', `Provider ${provider} refused the prompt: ${detail}`, false, { param: 'prompt' }),
  outputModerated: (provider: string, detail: string) => new UpstreamError('output_moderated', `Provider ${provider} withheld the generated image: ${detail}`),
};

/**
 * `error` as met once the upstream had accepted the work (a task, a queued request): never sent
 * elsewhere, whatever it says, since the work exists and may be billed; an account problem still
 * disables the channel.
 */
export function afterAcceptance(error: UpstreamError): UpstreamError {
  if (!error.traits.safeElsewhere) return error;
  return new UpstreamError(error.code, error.message, false, {
    ...(error.param === undefined ? {} : { param: error.param }),
    safeElsewhere: false,
    accountProblem: error.traits.accountProblem,
    statusCode: error.traits.statusCode,
  });
}

/**
 * `error` without the request's prompt, where the upstream quoted it ("the prompt … is invalid"), in
 * part or whole, with its whitespace changed or not (redactPrompt): what the gateway keeps of an
 * upstream's text (logs, stored errors, `disabled_reason`, the channel.auto_disabled event) never
 * holds a prompt. The prompt is removed from the upstream's text before it is cut, so a quote past
 * MAX_UPSTREAM_TEXT leaves nothing behind. Other errors are returned as they are.
 */
export function withoutPrompt(error: unknown, prompt: string): unknown {
  if (!(error instanceof UpstreamError)) return error;
  const source = told.get(error) ?? { message: error.message, ...error.traits };
  const strip = (text: string | undefined) => (text === undefined ? undefined : redactUpstreamText(text, accountSecrets, { prompt }));
  const message = strip(source.message) ?? '';
  const accountProblem = strip(source.accountProblem);
  const configurationProblem = strip(source.configurationProblem);
  const quoted = message !== error.message || accountProblem !== error.traits.accountProblem || configurationProblem !== error.traits.configurationProblem;
  // Unquoted, it is kept whole (a subclass carries meaning of its own: visual-transport's RegenerableModeration);
  // quoted, a plain copy (that meaning is its client's, which has given the error up by now).
  if (!quoted) return error;
  return new UpstreamError(error.code, message, error.retryable, {
    ...(error.param === undefined ? {} : { param: error.param }),
    ...error.traits,
    accountProblem,
    configurationProblem,
  });
}

/** An HTTP status that proves the upstream refused the call (504/524 are proxies giving up: unknown). */
export function refusedWithStatus(status: number): boolean {
  return status >= 500 && status !== 504 && status !== 524;
}

/** Connection errors that happen before the upstream could read a request. */
const NEVER_REACHED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

function retryAfterMs(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/**
 * POSTs JSON over the pooled keep-alive hop (upstream-http.ts) and parses the answer once; network failures
 * and non-JSON bodies become provider_error. A failure before any byte of the request was written (refused,
 * connect timeout, a reset while connecting) is safe to send elsewhere; one after it is not, since the
 * upstream may have accepted (and billed) the call.
 */
export async function postJson(
  provider: string,
  /** A client that calls one endpoint may pass it parsed once (a URL is only read here). */
  url: string | URL,
  body: unknown,
  headers: Record<string, string>,
  signal: AbortSignal,
  publicOnly = false,
  /** Called once the request was written to the upstream (upstream-http.ts). */
  onSent?: () => void,
): Promise<JsonAnswer> {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  return exchange(provider, 'POST', typeof url === 'string' ? new URL(url) : url, text, headers, signal, publicOnly, onSent);
}

/**
 * A bodiless GET or PUT whose answer is JSON (polling a task, cancelling it), with postJson's failures.
 * `url` is the caller's to check: one an upstream handed back must be on a host the account trusts.
 */
export async function callJson(
  provider: string,
  method: 'GET' | 'PUT',
  url: URL,
  headers: Record<string, string>,
  signal: AbortSignal,
  publicOnly = false,
): Promise<JsonAnswer> {
  return exchange(provider, method, url, undefined, headers, signal, publicOnly, undefined);
}

/**
 * As postJson, with a multipart/form-data body (file uploads: OpenAI's image edits); the answer is JSON.
 */
export async function postMultipart(
  provider: string,
  url: string,
  parts: readonly MultipartPart[],
  headers: Record<string, string>,
  signal: AbortSignal,
  publicOnly = false,
  onSent?: () => void,
): Promise<JsonAnswer> {
  const { body, contentType } = encodeMultipart(parts);
  return exchange(provider, 'POST', new URL(url), body, { ...headers, 'content-type': contentType }, signal, publicOnly, onSent);
}

export interface JsonAnswer {
  status: number;
  json: unknown;
  retryAfterMs?: number;
}

async function exchange(
  provider: string,
  method: 'GET' | 'POST' | 'PUT',
  target: URL,
  body: string | Buffer | undefined,
  headers: Record<string, string>,
  signal: AbortSignal,
  publicOnly: boolean,
  onSent: (() => void) | undefined,
): Promise<JsonAnswer> {
  let answer: UpstreamAnswer;
  try {
    answer = await send(method, target, body, headers, signal, publicOnly, onSent);
  } catch (error) {
    if (signal.aborted || !(error instanceof UpstreamHttpError)) throw error;
    const phase = error.neverSent ? 'before the request was sent' : 'after the request was sent';
    throw upstream.failed(provider, `could not reach ${target.host} (${error.code ?? error.message}, ${phase})`, {
      safeElsewhere: error.neverSent || (error.code !== undefined && NEVER_REACHED.has(error.code)),
    });
  }
  try {
    return { status: answer.status, json: JSON.parse(answer.body.toString('utf8')) as unknown, retryAfterMs: retryAfterMs(answer.header('retry-after')) };
  } catch {
    throw upstream.failed(provider, `answered HTTP ${answer.status} with a body that is not JSON`, { safeElsewhere: refusedWithStatus(answer.status) });
  }
}
