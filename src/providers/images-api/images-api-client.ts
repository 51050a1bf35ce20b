import type { ProviderImage, ProviderInputImage, ProviderRequest } from '../provider';
import { postJson, refusedWithStatus, registerAccountSecrets, upstream, type UpstreamError } from '../upstream-errors';
import { upstreamSeed } from '../upstream-models';

/**
 * Client for the OpenAI-style `POST {base}/images/generations` API, spoken by OpenAI itself,
 * Volcengine Ark (Seedream) and many self-hosted servers. Differences are options.
 */
export interface ImagesApiOptions {
  provider: string;
  baseUrl: string;
  apiKey: string;
  /** Fields the upstream needs besides the OpenAI ones (Ark: watermark, sequential_image_generation). */
  extraBody?: Record<string, unknown>;
  /** Ark makes one image per call; OpenAI takes `n`. */
  oneImagePerCall: boolean;
  /** Connect to public addresses only (API channels unless CHANNEL_ALLOW_PRIVATE_UPSTREAMS). */
  publicOnly?: boolean;
}

interface ImagesAnswer {
  data?: Array<{ url?: string; b64_json?: string; size?: string }>;
  error?: { code?: string | null; message?: string; type?: string };
}

/**
 * Moderation of the client's content (Ark's *SensitiveContentDetected and *RiskDetection, OpenAI's): the
 * client's doing, so mapped to content codes that never count against a channel's breaker nor disable it.
 */
const CONTENT_CODES = new Set([
  'InputTextSensitiveContentDetected',
  'InputImageSensitiveContentDetected',
  'InputTextRiskDetection',
  'InputImageRiskDetection',
  'content_policy_violation',
  'moderation_blocked',
]);
const OUTPUT_CODES = new Set(['OutputImageSensitiveContentDetected', 'OutputTextSensitiveContentDetected', 'OutputTextRiskDetection', 'OutputImageRiskDetection']);
/** Answers that say the account itself is unusable (OpenAI and Ark codes). */
const ACCOUNT_CODES = new Set([
  'invalid_api_key',
  'account_deactivated',
  'billing_not_active',
  'insufficient_quota',
  'AuthenticationError',
  'AccountOverdueError',
  'AccessDenied',
]);

function imagesApiError(provider: string, status: number, answer: ImagesAnswer, retryAfterMs: number | undefined): UpstreamError {
  const code = answer.error?.code ?? '';
  const detail = `HTTP ${status} ${code} ${answer.error?.message ?? ''}`.replace(/\s+/g, ' ').trim();
  if (CONTENT_CODES.has(code)) return upstream.contentRefused(provider, detail);
  if (OUTPUT_CODES.has(code)) return upstream.outputModerated(provider, detail);
  if (status === 401 || status === 403 || ACCOUNT_CODES.has(code) || ACCOUNT_CODES.has(answer.error?.type ?? '')) {
    return upstream.failed(provider, detail, { safeElsewhere: true, accountProblem: detail, statusCode: status });
  }
  if (status === 429 || code === 'ServerOverloaded' || status === 503) return upstream.busy(provider, detail, retryAfterMs);
  return upstream.failed(provider, detail, { safeElsewhere: refusedWithStatus(status) });
}

/**
 * How an input image travels: the gateway's signed URL when it has one (the intake gives one only
 * to models whose inputs go by URL), else inline as `data:image/<format>;base64,…` with the sniffed
 * format's lower-case name, as Ark documents it.
 */
function imageReference(image: ProviderInputImage): string {
  return image.url ?? `data:image/${image.format};base64,${image.bytes.toString('base64')}`;
}

/**
 * The input fields of the body: `image` as one string for one input and an array for several (as
 * Ark documents it, and OpenAI-compatible servers that take references read it); `mask` likewise
 * (only sent for models whose catalog entry says they take one; Ark has none).
 */
export function inputFields(request: Pick<ProviderRequest, 'inputImages' | 'mask'>): Record<string, unknown> {
  const images = request.inputImages ?? [];
  return {
    ...(images.length === 1 ? { image: imageReference(images[0]!) } : images.length > 1 ? { image: images.map(imageReference) } : {}),
    ...(request.mask ? { mask: imageReference(request.mask) } : {}),
  };
}

export class ImagesApiClient {
  constructor(private readonly options: ImagesApiOptions) {
    registerAccountSecrets(options.apiKey);
  }

  async generate(request: ProviderRequest, signal: AbortSignal): Promise<ProviderImage[]> {
    const calls = this.options.oneImagePerCall ? request.n : 1;
    const results = await Promise.all(Array.from({ length: calls }, (_, index) => this.call(request, index, this.options.oneImagePerCall ? 1 : request.n, signal)));
    return results.flat();
  }

  private async call(request: ProviderRequest, index: number, n: number, signal: AbortSignal): Promise<ProviderImage[]> {
    const { provider, baseUrl, apiKey, extraBody } = this.options;
    // Only models that document a seed get one (Seedream 4.x ignores it); models the table does not
    // know get seed + index, since an operator's OpenAI-compatible server may honour it.
    const seed = upstreamSeed(request.upstreamModel, request.seed, index);
    const { status, json, retryAfterMs } = await postJson(
      provider,
      `${baseUrl.replace(/\/$/, '')}/images/generations`,
      {
        model: request.upstreamModel,
        prompt: request.prompt,
        ...inputFields(request),
        size: `${request.width}x${request.height}`,
        response_format: request.responseFormat,
        ...(n > 1 ? { n } : {}),
        ...(seed !== undefined ? { seed } : {}),
        ...extraBody,
        ...request.upstreamOptions,
      },
      { Authorization: `Bearer ${apiKey}` },
      signal,
      this.options.publicOnly,
      request.onRequestSent,
    );
    const answer = (json ?? {}) as ImagesAnswer;
    if (status !== 200 || answer.error) throw imagesApiError(provider, status, answer, retryAfterMs);
    if (!Array.isArray(answer.data) || answer.data.length === 0) throw upstream.failed(provider, 'the answer has no images');
    return answer.data.map((item) => {
      const [width, height] = (item.size ?? `${request.width}x${request.height}`).split('x').map(Number);
      const image = { width: width || request.width, height: height || request.height };
      if (request.responseFormat === 'b64_json') {
        if (!item.b64_json) throw upstream.failed(provider, 'an image has no b64_json');
        return { b64Json: item.b64_json, ...image };
      }
      if (!item.url) throw upstream.failed(provider, 'an image has no url');
      return { url: item.url, ...image };
    });
  }
}
