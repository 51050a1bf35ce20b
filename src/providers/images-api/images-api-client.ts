import { type ErrorRule, failureOf, kindOf } from '../error-table';
import { findModelSpec, parseSize, seedFor, type UpstreamModelSpec } from '../model-spec';
import type { ProviderImage, ProviderInputImage, ProviderRequest } from '../provider';
import { postJson, refusedWithStatus, registerAccountSecrets, upstream, type UpstreamError } from '../upstream-errors';

/**
 * Client for the OpenAI-style `POST {base}/images/generations` API, spoken by OpenAI-compatible
 * servers and Volcengine Ark (Seedream). What differs comes from the format's descriptor: its
 * model table, its error table, extra fields.
 */
export interface ImagesApiOptions {
  provider: string;
  baseUrl: string;
  apiKey: string;
  /** Fields the upstream needs besides the OpenAI ones (Ark: watermark). */
  extraBody?: Record<string, unknown>;
  /** Ark makes one image per call; OpenAI takes `n`. */
  oneImagePerCall: boolean;
  /** Connect to public addresses only (API channels unless CHANNEL_ALLOW_PRIVATE_UPSTREAMS). */
  publicOnly?: boolean;
  /** The format's model rows: which optional fields each model documents. */
  models: readonly UpstreamModelSpec[];
  /** The format's error table (error-table.ts). */
  errors: readonly ErrorRule[];
  /** The answer's `usage.generated_images` is what the account is billed (Ark): compared with the images delivered. */
  readsUsage?: boolean;
}

interface ImagesAnswer {
  data?: Array<{ url?: string; b64_json?: string; size?: string }>;
  usage?: { generated_images?: number };
  error?: { code?: string | null; message?: string; type?: string };
}

function imagesApiError(options: ImagesApiOptions, status: number, answer: ImagesAnswer, retryAfterMs: number | undefined): UpstreamError {
  const { provider, errors } = options;
  const code = answer.error?.code ?? '';
  const detail = `HTTP ${status} ${code} ${answer.error?.message ?? ''}`.replace(/\s+/g, ' ').trim();
  const kind = kindOf(errors, code) ?? kindOf(errors, answer.error?.type);
  if (kind) return failureOf(kind, provider, detail, { status, retryAfterMs });
  if (status === 401 || status === 403) return failureOf('account', provider, detail, { status });
  if (status === 429 || status === 503) return upstream.busy(provider, detail, retryAfterMs);
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
  /** `{base}/images/generations`, parsed on the first call (a base URL that does not parse fails that call, as before). */
  private endpoint: URL | undefined;

  constructor(private readonly options: ImagesApiOptions) {
    registerAccountSecrets(options.apiKey);
  }

  async generate(request: ProviderRequest, signal: AbortSignal): Promise<ProviderImage[]> {
    const calls = this.options.oneImagePerCall ? request.n : 1;
    const n = this.options.oneImagePerCall ? 1 : request.n;
    // One call (most requests): its images as they are, without a list of lists.
    if (calls === 1) return this.call(request, 0, n, signal);
    const results = await Promise.all(Array.from({ length: calls }, (_, index) => this.call(request, index, n, signal)));
    return results.flat();
  }

  private async call(request: ProviderRequest, index: number, n: number, signal: AbortSignal): Promise<ProviderImage[]> {
    const { provider, baseUrl, apiKey, extraBody } = this.options;
    const spec = findModelSpec(this.options.models, request.upstreamModel, request.upstreamFamily);
    // Only models that document a seed get one (Seedream 4.x ignores it); models the table does not
    // know get seed + index, since an operator's OpenAI-compatible server may honour it.
    const seed = seedFor(spec, request.seed, index);
    this.endpoint ??= new URL(`${baseUrl.replace(/\/$/, '')}/images/generations`);
    const { status, json, retryAfterMs } = await postJson(
      provider,
      this.endpoint,
      {
        model: request.upstreamModel,
        prompt: request.prompt,
        ...inputFields(request),
        size: spec?.params.fixed_size ?? `${request.width}x${request.height}`,
        response_format: request.responseFormat,
        ...(n > 1 ? { n } : {}),
        ...(seed !== undefined ? { seed } : {}),
        ...extraBody,
        // Group output off: the gateway asks one image per call (only models that document the field get it).
        ...(spec?.params.sequential_image_generation ? { sequential_image_generation: 'disabled' } : {}),
        ...request.upstreamOptions,
      },
      { Authorization: `Bearer ${apiKey}` },
      signal,
      this.options.publicOnly,
      request.onRequestSent,
    );
    const answer = (json ?? {}) as ImagesAnswer;
    if (status !== 200 || answer.error) throw imagesApiError(this.options, status, answer, retryAfterMs);
    const answered = Array.isArray(answer.data) ? answer.data : [];
    // At most the `n` this call asked for: an image beyond it is one nobody pays for.
    const data = answered.slice(0, n);
    // Read before an answer is judged: a call that delivers no usable image may still have been billed.
    if (this.options.readsUsage && typeof answer.usage?.generated_images === 'number') {
      const field = request.responseFormat === 'b64_json' ? 'b64_json' : 'url';
      request.onBilled?.(answer.usage.generated_images, data.filter((item) => typeof item[field] === 'string' && item[field] !== '').length);
    } else if (answered.length > n) {
      // An upstream that reports no bill made (and presumably bills) every image it answered.
      request.onBilled?.(answered.length, n);
    }
    if (data.length === 0) throw upstream.failed(provider, 'the answer has no images');
    const images = data.map((item) => {
      // Ark writes `2048x2048` or `2048×2048`.
      const image = parseSize(item.size) ?? { width: request.width, height: request.height };
      if (request.responseFormat === 'b64_json') {
        if (!item.b64_json) throw upstream.failed(provider, 'an image has no b64_json');
        return { b64Json: item.b64_json, ...image };
      }
      if (!item.url) throw upstream.failed(provider, 'an image has no url');
      return { url: item.url, ...image };
    });
    return images;
  }
}
