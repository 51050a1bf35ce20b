import { upstream, UpstreamError } from './upstream-errors';

/**
 * What an upstream answer says, as the gateway acts on it:
 * - `content`: the client's prompt or inputs were refused (never counts against a channel);
 * - `output`: the generated image was withheld by moderation (the client's content too);
 * - `account`: the account is unusable (credentials, balance, spend cap): the channel is disabled, no retry;
 * - `busy`: transient load: retried (the same channel after a cool-down, or another);
 * - `transient`: a refusal the upstream documents as retryable (its moderation service down);
 * - `refused`: a definite refusal, nothing accepted: safe to send elsewhere;
 * - `configuration`: the channel's configuration does not fit (model not open, unknown endpoint):
 *   safe elsewhere, and not counted against the channel's breaker (its other models work).
 */
export type UpstreamFailureKind = 'content' | 'output' | 'account' | 'busy' | 'transient' | 'refused' | 'configuration';

/** One row of a wire format's error table: the upstream codes it covers (`*` matches any text, so a family of dotted sub-codes is one row). */
export interface ErrorRule {
  codes: readonly string[];
  kind: UpstreamFailureKind;
}

const patterns = new WeakMap<ErrorRule, RegExp>();

function patternOf(rule: ErrorRule): RegExp {
  let pattern = patterns.get(rule);
  if (!pattern) {
    const alternatives = rule.codes.map((code) =>
      code
        .split('*')
        .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
        .join('.*'),
    );
    pattern = new RegExp(`^(?:${alternatives.join('|')})$`);
    patterns.set(rule, pattern);
  }
  return pattern;
}

/** The kind the table gives an upstream code (first matching row), or undefined when no row covers it. */
export function kindOf(table: readonly ErrorRule[], code: string | undefined): UpstreamFailureKind | undefined {
  if (!code) return undefined;
  return table.find((rule) => patternOf(rule).test(code))?.kind;
}

/** The gateway's error for an upstream failure of `kind`. */
export function failureOf(kind: UpstreamFailureKind, provider: string, detail: string, answer: { status?: number; retryAfterMs?: number } = {}): UpstreamError {
  switch (kind) {
    case 'content':
      return upstream.contentRefused(provider, detail);
    case 'output':
      return upstream.outputModerated(provider, detail);
    case 'account':
      return upstream.failed(provider, detail, {
        safeElsewhere: true,
        accountProblem: detail,
        ...(answer.status === undefined ? {} : { statusCode: answer.status }),
      });
    case 'busy':
      return upstream.busy(provider, detail, answer.retryAfterMs);
    case 'transient':
      return new UpstreamError('provider_error', `Provider ${provider} failed: ${detail}`, true, { safeElsewhere: true, retryAfterMs: answer.retryAfterMs });
    case 'refused':
      return upstream.failed(provider, detail, { safeElsewhere: true });
    case 'configuration':
      return upstream.failed(provider, detail, { safeElsewhere: true, configurationProblem: detail });
  }
}
