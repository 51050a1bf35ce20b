import type { Logger } from 'pino';
import { ApiError } from '../errors/api-error';
import { UpstreamError } from '../providers/upstream-errors';

/**
 * The one line that says why a generation failed or was refused (docs/operators/production.md,
 * "Why did a generation fail"): ids, model, provider, channel, error code and what kind of failure
 * the upstream's was. Never the prompt, never the upstream's text.
 */
export interface GenerationFailure {
  request_id: string | undefined;
  generation_id: string | undefined;
  key_id: string | null | undefined;
  project_id: string | null | undefined;
  model: string | undefined;
  provider: string | undefined;
  channel_id: string | undefined;
  error_code: string;
}

/** Errors already logged by the runner's failure settlement: the handler does not log them again. */
const logged = new WeakSet<object>();

export function logGenerationFailure(logger: Logger, failure: GenerationFailure, error: unknown, message: 'generation failed' | 'generation refused'): void {
  logger.warn({ ...failure, ...upstreamKindOf(error) }, message);
  if (error && typeof error === 'object') logged.add(error);
}

export function markLogged(error: unknown): void {
  if (error && typeof error === 'object') logged.add(error);
}

export function wasLogged(error: unknown): boolean {
  return error !== null && typeof error === 'object' && logged.has(error);
}

/**
 * What kind of failure the upstream's was, from the traits the wire client gave it: `account` (key,
 * billing), `configuration` (the channel's model or address), `busy`, `timeout`, `content` (its
 * moderation), `output`, else `error`; with the HTTP status it answered, when it answered one.
 */
export function upstreamKindOf(error: unknown): { upstream_kind?: string; upstream_status?: number } {
  if (!(error instanceof UpstreamError)) return {};
  const { traits } = error;
  const kind =
    traits.accountProblem !== undefined
      ? 'account'
      : traits.configurationProblem !== undefined
        ? 'configuration'
        : error.code === 'provider_timeout'
          ? 'timeout'
          : error.code === 'provider_busy'
            ? 'busy'
            : error.code === 'content_policy_violation'
              ? 'content'
              : error.code === 'output_moderated'
                ? 'output'
                : 'error';
  return { upstream_kind: kind, ...(traits.statusCode !== undefined ? { upstream_status: traits.statusCode } : {}) };
}

/** The error code a failure is answered with. */
export function errorCodeOf(error: unknown): string {
  return error instanceof ApiError ? error.code : 'internal_error';
}
