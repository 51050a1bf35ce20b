import { ApiError } from '../../errors/api-error';
import { failureOf, kindOf } from '../error-table';
import type { ProviderImage, ProviderInputImage, ProviderRequest, WireClient } from '../provider';
import { postJson, refusedWithStatus, registerAccountSecrets, upstream, type UpstreamError } from '../upstream-errors';
import { GEMINI_ERRORS } from './gemini-errors';
import { geminiModel, imageConfigFor } from './gemini-models';

/**
 * Google's Gemini image models over the Gemini API: `POST {base}/v1beta/models/{model}:generateContent`
 * with `x-goog-api-key` (ai.google.dev/api/generate-content). One call makes one image and takes no `n`
 * and no seed, so an `n`-image request is `n` calls. The image comes back inline as base64.
 */
export interface GeminiClientOptions {
  provider: string;
  /**
   * The API's root, `https://generativelanguage.googleapis.com`; the version (`v1beta`, the official
   * SDK's default) is appended unless the path already ends with one (a proxy's `…/v1beta`).
   */
  baseUrl: string;
  apiKey: string;
  publicOnly?: boolean;
}

interface GeminiPart {
  text?: string;
  inlineData?: { mimeType?: string; data?: string };
  inline_data?: { mime_type?: string; data?: string };
  /** A part of the model's thinking: the 3.x image models' interim drafts come as image parts marked so. */
  thought?: boolean;
}

interface GeminiErrorDetail {
  '@type'?: string;
  /** google.rpc.ErrorInfo */
  reason?: string;
  /** google.rpc.RetryInfo */
  retryDelay?: string;
  /** google.rpc.QuotaFailure */
  violations?: Array<{ quotaId?: string; quotaMetric?: string }>;
}

interface GeminiAnswer {
  candidates?: Array<{ content?: { parts?: GeminiPart[] }; finishReason?: string; finishMessage?: string }>;
  promptFeedback?: { blockReason?: string; blockReasonMessage?: string };
  error?: { code?: number; message?: string; status?: string; details?: GeminiErrorDetail[] };
}

/** The version segment the official SDK puts after the root (googleapis/js-genai `GOOGLE_AI_API_DEFAULT_VERSION`). */
const API_VERSION = 'v1beta';

/** `{root}/v1beta`, or the base as it is when it already names a version. */
export function versionedBase(baseUrl: string): string {
  const base = baseUrl.replace(/\/+$/, '');
  return /\/v1(?:alpha|beta)?$/.test(base) ? base : `${base}/${API_VERSION}`;
}

/** `"30s"` / `"1.5s"` of a google.rpc.RetryInfo, in ms. */
function retryDelayMs(answer: GeminiAnswer): number | undefined {
  const delay = answer.error?.details?.find((d) => d['@type']?.endsWith('google.rpc.RetryInfo'))?.retryDelay;
  const seconds = delay === undefined ? Number.NaN : Number.parseFloat(delay);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : undefined;
}

/**
 * `quota.PerDay` when a QuotaFailure names an exhausted per-day quota (its `quotaId`, e.g.
 * `GenerateRequestsPerDayPerProjectPerModel-FreeTier`, ai.google.dev/gemini-api/docs/troubleshooting):
 * unlike a per-minute one, it does not free within the request's life.
 */
function quotaCodes(answer: GeminiAnswer): string[] {
  const quotaIds = (answer.error?.details ?? [])
    .filter((d) => d['@type']?.endsWith('google.rpc.QuotaFailure'))
    .flatMap((d) => d.violations ?? [])
    .map((v) => v.quotaId ?? '');
  return quotaIds.some((id) => id.includes('PerDay')) ? ['quota.PerDay'] : [];
}

/** The codes a failed answer is looked up by (gemini-errors.ts), most specific first. */
function errorCodes(httpStatus: number, answer: GeminiAnswer): string[] {
  const reasons = (answer.error?.details ?? []).map((d) => d.reason).filter((r): r is string => typeof r === 'string' && r.length > 0);
  const status = answer.error?.status;
  return [...quotaCodes(answer), ...reasons, ...(status ? [status] : []), `http_${httpStatus}`];
}

function kindOfCodes(codes: readonly string[]) {
  return codes.map((code) => kindOf(GEMINI_ERRORS, code)).find((kind) => kind !== undefined);
}

/** Our error for a non-200 answer (or one carrying `error`), by Gemini's error table; else by its HTTP status. */
export function geminiError(provider: string, httpStatus: number, answer: GeminiAnswer, retryAfterMs: number | undefined): UpstreamError {
  const codes = errorCodes(httpStatus, answer);
  const daily = codes.includes('quota.PerDay') ? ' (a per-day quota is exhausted: the account is unusable until it resets, at midnight Pacific time)' : '';
  const detail = `HTTP ${httpStatus} ${answer.error?.status ?? ''} ${answer.error?.message ?? ''}${daily}`.replace(/\s+/g, ' ').trim();
  const kind = kindOfCodes(codes);
  if (kind) return failureOf(kind, provider, detail, { status: httpStatus, retryAfterMs: retryAfterMs ?? retryDelayMs(answer) });
  return upstream.failed(provider, detail, { safeElsewhere: refusedWithStatus(httpStatus) });
}

/**
 * A 200 answer that carries no image because something was refused: the prompt (`promptFeedback`)
 * or the candidate (`finishReason`), by the error table. Undefined when it refused nothing.
 */
function refusal(provider: string, answer: GeminiAnswer): UpstreamError | undefined {
  const block = answer.promptFeedback?.blockReason;
  const candidate = answer.candidates?.[0];
  const codes = [...(block ? [`blockReason.${block}`] : []), ...(candidate?.finishReason ? [`finishReason.${candidate.finishReason}`] : [])];
  const kind = kindOfCodes(codes);
  if (!kind) return undefined;
  const detail = block
    ? `prompt blocked (${block}) ${answer.promptFeedback?.blockReasonMessage ?? ''}`
    : `finishReason ${candidate?.finishReason ?? ''} ${candidate?.finishMessage ?? ''}`;
  return failureOf(kind, provider, detail.trim());
}

function inlinePart(image: ProviderInputImage): GeminiPart {
  return { inline_data: { mime_type: image.mimeType, data: image.bytes.toString('base64') } };
}

/** The body of one call: the prompt, then the reference images, as one user turn; images only back. */
export function generateContentBody(request: ProviderRequest): Record<string, unknown> {
  if (request.mask)
    throw new ApiError(
      'internal_error',
      `Gemini takes no mask (model ${request.upstreamModel}); the request should have been refused before it reached the provider.`,
    );
  if (!geminiModel(request.upstreamModel, request.upstreamFamily)) {
    // The size must become an aspect ratio and a tier, which only a known model's table says.
    throw new ApiError(
      'invalid_request',
      `${request.upstreamModel} is not a Gemini image model the gateway knows; its catalog entry needs an upstream_family.`,
      { param: 'model' },
    );
  }
  const imageConfig = imageConfigFor(request.upstreamModel, request.width, request.height, request.upstreamFamily);
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
  private readonly base: string;

  constructor(private readonly options: GeminiClientOptions) {
    registerAccountSecrets(options.apiKey);
    this.base = versionedBase(options.baseUrl);
  }

  async generate(request: ProviderRequest, signal: AbortSignal): Promise<ProviderImage[]> {
    const calls = Array.from({ length: request.n }, () => this.call(request, signal));
    return (await Promise.all(calls)).flat();
  }

  private async call(request: ProviderRequest, signal: AbortSignal): Promise<ProviderImage[]> {
    const { provider, apiKey, publicOnly } = this.options;
    const body = generateContentBody(request);
    const url = `${this.base}/models/${encodeURIComponent(request.upstreamModel)}:generateContent`;
    const { status, json, retryAfterMs } = await postJson(provider, url, body, { 'x-goog-api-key': apiKey }, signal, publicOnly, request.onRequestSent);
    const answer = (json ?? {}) as GeminiAnswer;
    if (status !== 200 || answer.error) throw geminiError(provider, status, answer, retryAfterMs);
    const refused = refusal(provider, answer);
    if (refused) throw refused;
    const candidate = answer.candidates?.[0];
    // Thought parts are the model's interim drafts (the 3.x models think before the final image): never delivered.
    const image = (candidate?.content?.parts ?? [])
      .filter((part) => part.thought !== true)
      .map((part) => part.inlineData?.data ?? part.inline_data?.data)
      .find((data) => typeof data === 'string' && data.length > 0);
    // The call ran (and is billed) but made no image, e.g. the model answered in text only, or NO_IMAGE.
    if (!image) throw upstream.failed(provider, `the answer has no image (finishReason ${candidate?.finishReason ?? 'none'})`);
    // One image per call: a second one would be an image nobody asked (or pays) for. Its size is read
    // from its bytes when it is stored (images.service.ts); the asked one stands until then.
    return [{ b64Json: image, width: request.width, height: request.height }];
  }
}
