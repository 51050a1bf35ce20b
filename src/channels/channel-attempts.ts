import type { GenerationAttemptsTable } from '../db/schema';
import type { ProviderImage, ProviderTokenUsage } from '../providers/provider';

/** One channel call of a request, as failover records it; written as generation_attempts rows with the settlement. */
export interface Attempt {
  imageIndex: number;
  channelId: string;
  outcome: 'succeeded' | 'failed' | 'failed_over';
  errorCode: string | null;
  latencyMs: number;
  startedAt: number;
  /** The tokens the upstream reported for the call, where it reports them. */
  usage?: ProviderTokenUsage;
}

export function attemptRows(generationId: string, attempts: Attempt[]): GenerationAttemptsTable[] {
  return attempts.map((a, seq) => ({
    generation_id: generationId,
    seq,
    image_index: a.imageIndex,
    channel_id: a.channelId,
    outcome: a.outcome,
    error_code: a.errorCode,
    // An integer column: a clock that steps (NTP, a test clock) must not make the settlement that writes it fail.
    latency_ms: Math.min(Math.max(a.latencyMs, 0), 2_147_483_647),
    started_at: a.startedAt,
    upstream_usage: a.usage ? JSON.stringify(openAiUsage(a.usage)) : null,
  }));
}

/** The tokens of one call: clients put them on the call's first image (ProviderImage.usage). */
export function callUsage(images: ProviderImage[]): ProviderTokenUsage | undefined {
  return images.find((image) => image.usage !== undefined)?.usage;
}

/** Stored in OpenAI's own shape, the one an operator reconciles against the upstream's bill. */
function openAiUsage(usage: ProviderTokenUsage): Record<string, unknown> {
  const details = (image: number | undefined, text: number | undefined) =>
    image === undefined && text === undefined
      ? undefined
      : { ...(image !== undefined ? { image_tokens: image } : {}), ...(text !== undefined ? { text_tokens: text } : {}) };
  const input = details(usage.inputImageTokens, usage.inputTextTokens);
  const output = details(usage.outputImageTokens, usage.outputTextTokens);
  return {
    input_tokens: usage.inputTokens,
    output_tokens: usage.outputTokens,
    total_tokens: usage.totalTokens,
    ...(input ? { input_tokens_details: input } : {}),
    ...(output ? { output_tokens_details: output } : {}),
  };
}
