import { ApiError, type ApiErrorOptions } from '../errors/api-error';
import type { ErrorCode } from '../errors/error-codes';

/** What a failure says about where the request may go next (see README "Channels"). */
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
}

/**
 * A failure reported by (or about) an upstream. `retryable` marks the ones worth another try
 * (the upstream said it is busy); `countsAgainstProvider` feeds the circuit breaker (content
 * refusals are the caller's doing, not the provider's).
 */
export class UpstreamError extends ApiError {
  readonly traits: UpstreamFailureTraits;

  constructor(
    code: ErrorCode,
    message: string,
    readonly retryable = false,
    options: ApiErrorOptions & UpstreamFailureTraits = {},
  ) {
    super(code, message, options);
    this.traits = { safeElsewhere: options.safeElsewhere ?? retryable, retryAfterMs: options.retryAfterMs, accountProblem: options.accountProblem };
  }

  get countsAgainstProvider(): boolean {
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
  outputModerated: (provider: string, detail: string) =>
    new UpstreamError('output_moderated', `Provider ${provider} withheld the generated image: ${detail}`),
};

/** An HTTP status that proves the upstream refused the call (504/524 are proxies giving up: unknown). */
export function refusedWithStatus(status: number): boolean {
  return status >= 500 && status !== 504 && status !== 524;
}

/** Connection errors that happen before the upstream could read a request. */
const NEVER_REACHED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

function causeCode(error: unknown): string | undefined {
  const cause = (error as { cause?: { code?: unknown } }).cause;
  return typeof cause?.code === 'string' ? cause.code : undefined;
}

function retryAfterMs(header: string | null): number | undefined {
  if (header === null) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/** POSTs JSON and parses a JSON answer; network failures and non-JSON bodies become provider_error. */
export async function postJson(
  provider: string,
  url: string,
  body: unknown,
  headers: Record<string, string>,
  signal: AbortSignal,
): Promise<{ status: number; json: unknown; retryAfterMs?: number }> {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  let response: Response;
  try {
    response = await fetch(url, { method: 'POST', body: text, headers: { 'Content-Type': 'application/json', ...headers }, signal });
  } catch (error) {
    if (signal.aborted) throw error;
    const code = causeCode(error);
    // A reset or a closed socket may come after the upstream read (and billed) the request.
    throw upstream.failed(provider, `could not reach ${new URL(url).host} (${code ?? (error as Error).message})`, {
      safeElsewhere: code !== undefined && NEVER_REACHED.has(code),
    });
  }
  const raw = await response.text();
  try {
    return { status: response.status, json: JSON.parse(raw) as unknown, retryAfterMs: retryAfterMs(response.headers.get('retry-after')) };
  } catch {
    throw upstream.failed(provider, `answered HTTP ${response.status} with a body that is not JSON`, { safeElsewhere: refusedWithStatus(response.status) });
  }
}
