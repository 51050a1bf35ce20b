import { ApiError, type ApiErrorOptions } from '../errors/api-error';
import type { ErrorCode } from '../errors/error-codes';

/**
 * A failure reported by (or about) an upstream. `retryable` marks the ones worth another try
 * (the upstream said it is busy); `countsAgainstProvider` feeds the circuit breaker (content
 * refusals are the caller's doing, not the provider's).
 */
export class UpstreamError extends ApiError {
  constructor(
    code: ErrorCode,
    message: string,
    readonly retryable = false,
    options: ApiErrorOptions = {},
  ) {
    super(code, message, options);
  }

  get countsAgainstProvider(): boolean {
    return this.code === 'provider_error' || this.code === 'provider_busy' || this.code === 'provider_timeout';
  }
}

export const upstream = {
  busy: (provider: string, detail: string) => new UpstreamError('provider_busy', `Provider ${provider} is busy: ${detail}`, true),
  failed: (provider: string, detail: string) => new UpstreamError('provider_error', `Provider ${provider} failed: ${detail}`),
  contentRefused: (provider: string, detail: string) =>
    new UpstreamError('content_policy_violation', `Provider ${provider} refused the prompt: ${detail}`, false, { param: 'prompt' }),
  outputModerated: (provider: string, detail: string) =>
    new UpstreamError('output_moderated', `Provider ${provider} withheld the generated image: ${detail}`),
};

/** POSTs JSON and parses a JSON answer; network failures and non-JSON bodies become provider_error. */
export async function postJson(
  provider: string,
  url: string,
  body: unknown,
  headers: Record<string, string>,
  signal: AbortSignal,
): Promise<{ status: number; json: unknown }> {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  let response: Response;
  try {
    response = await fetch(url, { method: 'POST', body: text, headers: { 'Content-Type': 'application/json', ...headers }, signal });
  } catch (error) {
    if (signal.aborted) throw error;
    throw upstream.failed(provider, `could not reach ${new URL(url).host} (${(error as Error).message})`);
  }
  const raw = await response.text();
  try {
    return { status: response.status, json: JSON.parse(raw) as unknown };
  } catch {
    throw upstream.failed(provider, `answered HTTP ${response.status} with a body that is not JSON`);
  }
}
