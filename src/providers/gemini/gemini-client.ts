import { ApiError } from '../../errors/api-error';
import type { ProviderImage, ProviderInputImage, ProviderRequest, WireClient } from '../provider';
import { postJson, refusedWithStatus, registerAccountSecrets, upstream, type UpstreamError } from '../upstream-errors';
import { imageConfigFor } from './gemini-models';

/**
 * Google's Gemini image models over the Gemini API: `POST {base}/models/{model}:generateContent` with
 * `x-goog-api-key` (ai.google.dev/api/generate-content). One call makes one image and takes no `n`
 * and no seed, so an `n`-image request is `n` calls. The image comes back inline as base64.
 */
export interface GeminiClientOptions {
  provider: string;
  /** Up to the API version: `https://generativelanguage.googleapis.com/v1beta`. */
  baseUrl: string;
  apiKey: string;
  publicOnly?: boolean;
}

interface GeminiPart {
  text?: string;
  inlineData?: { mimeType?: string; data?: string };
  inline_data?: { mime_type?: string; data?: string };
}

interface GeminiAnswer {
  candidates?: Array<{ content?: { parts?: GeminiPart[] }; finishReason?: string; finishMessage?: string }>;
  promptFeedback?: { blockReason?: string; blockReasonMessage?: string };
  error?: { code?: number; message?: string; status?: string; details?: Array<{ '@type'?: string; reason?: string; retryDelay?: string }> };
}

/** finishReason values that mean the prompt or its images were refused (the client's content). */
const PROMPT_REFUSALS = new Set(['SAFETY', 'PROHIBITED_CONTENT', 'BLOCKLIST', 'SPII']);
/** The image was made and withheld by the output filter. */
const OUTPUT_REFUSALS = new Set(['IMAGE_SAFETY', 'IMAGE_PROHIBITED_CONTENT']);

/** `"30s"` / `"1.5s"` of a google.rpc.RetryInfo, in ms. */
function retryDelayMs(answer: GeminiAnswer): number | undefined {
  const delay = answer.error?.details?.find((d) => d['@type']?.endsWith('google.rpc.RetryInfo'))?.retryDelay;
  const seconds = delay === undefined ? Number.NaN : Number.parseFloat(delay);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : undefined;
}

/** Our error for a non-200 answer, by Google's canonical status (cloud.google.com/apis/design/errors). */
export function geminiError(provider: string, httpStatus: number, answer: GeminiAnswer, retryAfterMs: number | undefined): UpstreamError {
  const status = answer.error?.status ?? '';
  const detail = `HTTP ${httpStatus} ${status} ${answer.error?.message ?? ''}`.replace(/\s+/g, ' ').trim();
  const reasons = (answer.error?.details ?? []).map((d) => d.reason ?? '');
  const accountProblem =
    httpStatus === 401 || httpStatus === 403 || status === 'UNAUTHENTICATED' || status === 'PERMISSION_DENIED' || status === 'FAILED_PRECONDITION' || reasons.some((r) => r.startsWith('API_KEY_'));
  if (accountProblem) return upstream.failed(provider, detail, { safeElsewhere: true, accountProblem: detail, statusCode: httpStatus });
  if (httpStatus === 429 || status === 'RESOURCE_EXHAUSTED' || httpStatus === 503 || status === 'UNAVAILABLE') return upstream.busy(provider, detail, retryAfterMs ?? retryDelayMs(answer));
  // NOT_FOUND: the channel names a model this account does not have; nothing ran.
  if (httpStatus === 404) return upstream.failed(provider, detail, { safeElsewhere: true });
  return upstream.failed(provider, detail, { safeElsewhere: refusedWithStatus(httpStatus) });
}

function inlinePart(image: ProviderInputImage): GeminiPart {
  return { inline_data: { mime_type: image.mimeType, data: image.bytes.toString('base64') } };
}

/** The body of one call: the prompt, then the reference images, as one user turn; images only back. */
export function generateContentBody(request: ProviderRequest): Record<string, unknown> {
  if (request.mask) throw new ApiError('internal_error', `Gemini takes no mask (model ${request.upstreamModel}); the request should have been refused before it reached the provider.`);
  const imageConfig = imageConfigFor(request.upstreamModel, request.width, request.height);
  if (!imageConfig) {
    throw new ApiError('invalid_request', `Size ${request.width}x${request.height} is not one ${request.upstreamModel} makes.`, { param: 'size' });
  }
  return {
    contents: [{ role: 'user', parts: [{ text: request.prompt }, ...(request.inputImages ?? []).map(inlinePart)] }],
    generationConfig: { responseModalities: ['IMAGE'], imageConfig },
    ...request.upstreamOptions,
  };
}

export class GeminiClient implements WireClient {
  constructor(private readonly options: GeminiClientOptions) {
    registerAccountSecrets(options.apiKey);
  }

  async generate(request: ProviderRequest, signal: AbortSignal): Promise<ProviderImage[]> {
    const calls = Array.from({ length: request.n }, () => this.call(request, signal));
    return (await Promise.all(calls)).flat();
  }

  private async call(request: ProviderRequest, signal: AbortSignal): Promise<ProviderImage[]> {
    const { provider, baseUrl, apiKey } = this.options;
    const body = generateContentBody(request);
    const url = `${baseUrl.replace(/\/$/, '')}/models/${encodeURIComponent(request.upstreamModel)}:generateContent`;
    const { status, json, retryAfterMs } = await postJson(provider, url, body, { 'x-goog-api-key': apiKey }, signal, this.options.publicOnly, request.onRequestSent);
    const answer = (json ?? {}) as GeminiAnswer;
    if (status !== 200 || answer.error) throw geminiError(provider, status, answer, retryAfterMs);
    const block = answer.promptFeedback?.blockReason;
    if (block) throw upstream.contentRefused(provider, `prompt blocked (${block}) ${answer.promptFeedback?.blockReasonMessage ?? ''}`.trim());
    const candidate = answer.candidates?.[0];
    const finish = candidate?.finishReason ?? '';
    if (PROMPT_REFUSALS.has(finish)) throw upstream.contentRefused(provider, `finishReason ${finish} ${candidate?.finishMessage ?? ''}`.trim());
    if (OUTPUT_REFUSALS.has(finish)) throw upstream.outputModerated(provider, `finishReason ${finish} ${candidate?.finishMessage ?? ''}`.trim());
    const image = (candidate?.content?.parts ?? []).map((part) => part.inlineData?.data ?? part.inline_data?.data).find((data) => typeof data === 'string' && data.length > 0);
    // The call ran (and is billed) but made no image, e.g. the model answered in text only.
    if (!image) throw upstream.failed(provider, `the answer has no image (finishReason ${finish || 'none'})`);
    // One image per call: a second one would be an image nobody asked (or pays) for.
    return [{ b64Json: image, width: request.width, height: request.height }];
  }
}
