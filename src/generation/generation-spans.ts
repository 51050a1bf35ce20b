import type { CatalogModel } from '../config/catalog';
import type { GenerationAttemptsTable } from '../db/schema';
import { recordSpan, type SpanAttributes } from '../telemetry/tracing';
import { upstreamKindOf } from './failure-log';

/**
 * One span per upstream attempt (OpenTelemetry's GenAI conventions), from the attempt rows the
 * channel phase returns: their start and duration as measured there. The wire calls each attempt
 * made are the HTTP client spans beside them (src/providers/upstream-http.ts), whose `traceparent`
 * went to the upstream.
 */
export function traceAttempts(attempts: readonly GenerationAttemptsTable[], chain: readonly CatalogModel[], error: unknown): void {
  const last = attempts.at(-1);
  for (const attempt of attempts) {
    const entry = chain.find((candidate) => candidate.model === attempt.model) ?? chain[0];
    const attributes: SpanAttributes = {
      'gen_ai.operation.name': 'generate_content',
      ...(entry ? { 'gen_ai.provider.name': entry.provider, 'gen_ai.system': entry.provider, 'gen_ai.request.model': entry.upstream_model } : {}),
      ...(attempt.outcome === 'succeeded' && entry ? { 'gen_ai.response.model': entry.upstream_model } : {}),
      ...usageOf(attempt.upstream_usage),
      'gateway.channel.id': attempt.channel_id,
      'gateway.generation.id': attempt.generation_id,
      'gateway.image_index': attempt.image_index,
      'gateway.outcome': attempt.outcome,
    };
    // The upstream's kind is known for the attempt that ended the run.
    const kind = attempt === last ? upstreamKindOf(error).upstream_kind : undefined;
    const errorKind = attempt.error_code === null ? undefined : kind === undefined ? attempt.error_code : `${attempt.error_code}/${kind}`;
    recordSpan(
      `generate_content ${entry?.upstream_model ?? attempt.model ?? ''}`.trim(),
      attributes,
      attempt.started_at,
      attempt.started_at + attempt.latency_ms,
      errorKind,
    );
  }
}

/** The tokens an upstream reported (OpenAI's `usage`: input_tokens, output_tokens), as gen_ai.usage.*. */
function usageOf(usage: string | null | undefined): SpanAttributes {
  if (usage === null || usage === undefined) return {};
  try {
    const parsed = JSON.parse(usage) as { input_tokens?: unknown; output_tokens?: unknown };
    return {
      ...(typeof parsed.input_tokens === 'number' ? { 'gen_ai.usage.input_tokens': parsed.input_tokens } : {}),
      ...(typeof parsed.output_tokens === 'number' ? { 'gen_ai.usage.output_tokens': parsed.output_tokens } : {}),
    };
  } catch {
    return {};
  }
}
