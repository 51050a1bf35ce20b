import { ApiError } from '../../errors/api-error';
import type { ProviderImage, ProviderInputImage, ProviderRequest, ProviderTokenUsage, WireClient } from '../provider';
import { postJson, postMultipart, refusedWithStatus, registerAccountSecrets, upstream, UpstreamError, type JsonAnswer } from '../upstream-errors';
import type { MultipartPart } from '../upstream-http';
import { type ErrorRule, failureOf, kindOf } from '../error-table';
import { imageOptionsFor } from '../model-spec';
import { MASK_MAX_BYTES, type OpenAIImageModel, type OpenAIImagesEndpoint, openaiImageModel } from './models';

/**
 * OpenAI's Images API, first-class: `POST {base}/images/generations` (JSON) and, with input images,
 * `POST {base}/images/edits` (multipart/form-data, one `image[]` part per image and a `mask` part), as
 * the official `openai` Node SDK sends them (node_modules/openai/resources/images.js: `edit` posts
 * `multipartFormRequestOptions`, whose arrays become `key[]` parts, internal/uploads.js). What each model
 * takes is in models.ts; nothing else is sent. Every image comes back as base64 and is stored by the
 * gateway (so no result host is ever fetched): GPT image models answer nothing else, and dall-e-3 is
 * asked for `b64_json`.
 */
export interface OpenAIImagesOptions {
  provider: string;
  baseUrl: string;
  apiKey: string;
  /** Connect to public addresses only (API channels unless CHANNEL_ALLOW_PRIVATE_UPSTREAMS). */
  publicOnly?: boolean;
}

/** `ImagesResponse` (SDK): the fields read here. */
interface ImagesAnswer {
  data?: Array<{ b64_json?: string; url?: string }>;
  size?: string;
  usage?: {
    input_tokens?: number;
    output_tokens?: number;
    total_tokens?: number;
    input_tokens_details?: { image_tokens?: number; text_tokens?: number };
    output_tokens_details?: { image_tokens?: number; text_tokens?: number };
  };
  error?: { code?: string | null; message?: string; type?: string; param?: string | null };
}

/**
 * OpenAI's error table: what an `error.code` (else its `error.type`) means. The spend codes come with
 * `type: insufficient_quota` (OpenAI's error-codes guide); `model_not_found` (404: the model does not
 * exist or this account has no access to it) is the channel's configuration, safe on another account.
 */
export const OPENAI_ERRORS: readonly ErrorRule[] = [
  { codes: ['moderation_blocked', 'content_policy_violation'], kind: 'content' },
  {
    codes: [
      'invalid_api_key',
      'insufficient_quota',
      'billing_hard_limit_reached',
      'billing_not_active',
      'account_deactivated',
      'credit_balance_exhausted',
      'organization_spend_limit_exceeded',
      'project_spend_limit_exceeded',
      'organization_usage_limit_exceeded',
    ],
    kind: 'account',
  },
  { codes: ['model_not_found'], kind: 'configuration' },
  { codes: ['rate_limit_exceeded'], kind: 'busy' },
];

/** The error table applied to an answer, then its status: 401/403 the account's, 429 busy, another 400 an invalid request, 5xx a refusal but 504/524. */
export function openaiImagesError(provider: string, status: number, answer: ImagesAnswer, retryAfterMs: number | undefined): UpstreamError {
  const code = answer.error?.code ?? '';
  const detail = `HTTP ${status} ${code} ${answer.error?.message ?? ''}`.replace(/\s+/g, ' ').trim();
  const kind =
    kindOf(OPENAI_ERRORS, code) ??
    kindOf(OPENAI_ERRORS, answer.error?.type) ??
    (status === 401 || status === 403 ? 'account' : status === 429 ? 'busy' : undefined);
  if (kind !== undefined) return failureOf(kind, provider, detail, { status, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) });
  if (status === 400) {
    // The upstream refused what was sent: no other channel of it would take it either.
    return new UpstreamError('invalid_request', `Provider ${provider} refused the request: ${detail}`, false, {
      param: answer.error?.param ?? null,
      safeElsewhere: false,
    });
  }
  // Another 4xx (an unknown model on this account, ...) and 5xx other than 504/524 are refusals: nothing was made.
  return upstream.failed(provider, detail, { safeElsewhere: status < 500 || refusedWithStatus(status) });
}

function invalid(message: string, param: string): ApiError {
  return new ApiError('invalid_request', message, { param });
}

/**
 * The optional fields sent: the catalog's `upstream_options`, then the client's own options and its
 * `quality` (which also priced the images), only those the model documents on this endpoint
 * (model-spec.ts imageOptionsFor: a GPT image edit takes no `moderation`, dall-e-3 no `background`); a
 * documented field with a value the model does not take is refused before sending.
 */
export function openaiOptions(
  row: OpenAIImageModel,
  endpoint: OpenAIImagesEndpoint,
  request: Pick<ProviderRequest, 'upstreamOptions' | 'imageOptions' | 'quality'>,
): Record<string, string | number> {
  const merged = { ...request.upstreamOptions, ...request.imageOptions, ...(request.quality !== undefined ? { quality: request.quality } : {}) };
  return imageOptionsFor(row.model, { params: { image_options: row.image_options } }, merged, endpoint === 'edits');
}

/** Input images and mask as the edits endpoint takes them; refused here, before anything is sent. */
function checkInputs(row: OpenAIImageModel, images: readonly ProviderInputImage[], mask: ProviderInputImage | undefined): void {
  const limits = row.inputs;
  if (!limits) throw invalid(`Model ${row.model} takes no input images (OpenAI's /images/edits does not serve it).`, 'image');
  if (images.length === 0) throw invalid(`An edit on model ${row.model} needs at least one image besides the mask.`, 'image');
  if (images.length > limits.max_images) throw invalid(`Model ${row.model} takes at most ${limits.max_images} input images (got ${images.length}).`, 'image');
  for (const [i, image] of images.entries()) {
    if (!limits.formats.includes(image.format)) throw invalid(`Image ${i} is ${image.format}; model ${row.model} takes ${limits.formats.join(', ')}.`, 'image');
    if (image.bytes.length > limits.max_bytes) throw invalid(`Image ${i} is larger than model ${row.model} takes (${limits.max_bytes} bytes).`, 'image');
  }
  if (!mask) return;
  const first = images[0]!;
  if (mask.format !== 'png') throw invalid(`The mask must be a PNG (it is ${mask.format}).`, 'mask');
  if (mask.bytes.length > MASK_MAX_BYTES) throw invalid(`The mask must be smaller than 4 MB.`, 'mask');
  if (mask.width !== first.width || mask.height !== first.height) {
    throw invalid(`The mask must be the size of the first image (${first.width}x${first.height}; it is ${mask.width}x${mask.height}).`, 'mask');
  }
}

const EXTENSIONS: Record<string, string> = { jpeg: 'jpg', png: 'png', webp: 'webp' };

function filePart(name: string, filename: string, image: ProviderInputImage): MultipartPart {
  return { name, filename: `${filename}.${EXTENSIONS[image.format] ?? image.format}`, contentType: image.mimeType, value: image.bytes };
}

function tokenUsage(usage: ImagesAnswer['usage']): ProviderTokenUsage | undefined {
  if (!usage || typeof usage.total_tokens !== 'number') return undefined;
  const details = {
    inputImageTokens: usage.input_tokens_details?.image_tokens,
    inputTextTokens: usage.input_tokens_details?.text_tokens,
    outputImageTokens: usage.output_tokens_details?.image_tokens,
    outputTextTokens: usage.output_tokens_details?.text_tokens,
  };
  return {
    inputTokens: usage.input_tokens ?? 0,
    outputTokens: usage.output_tokens ?? 0,
    totalTokens: usage.total_tokens,
    ...Object.fromEntries(Object.entries(details).filter(([, value]) => typeof value === 'number')),
  };
}

export class OpenAIImagesClient implements WireClient {
  constructor(private readonly options: OpenAIImagesOptions) {
    registerAccountSecrets(options.apiKey);
  }

  async generate(request: ProviderRequest, signal: AbortSignal): Promise<ProviderImage[]> {
    const { provider } = this.options;
    const row = openaiImageModel(request.upstreamModel);
    // A catalog entry naming a model this table does not know: nothing was sent, another channel may serve it.
    if (!row) throw upstream.failed(provider, `model ${request.upstreamModel} is not an OpenAI image model this gateway knows`, { safeElsewhere: true });
    const size = `${request.width}x${request.height}`;
    if (!row.allowed_sizes.includes(size))
      throw invalid(`Size ${size} is not available on model ${row.model}: it takes ${row.allowed_sizes.join(', ')}.`, 'size');
    if (request.prompt.length > row.max_prompt_chars)
      throw invalid(`The prompt is longer than model ${row.model} takes (${row.max_prompt_chars} characters).`, 'prompt');
    const images = request.inputImages ?? [];
    const endpoint: OpenAIImagesEndpoint = images.length > 0 || request.mask ? 'edits' : 'generations';
    if (endpoint === 'edits') checkInputs(row, images, request.mask);
    const fields = openaiOptions(row, endpoint, request);
    // dall-e-3 makes one image per call ("only `n=1` is supported"): n images are n calls.
    const counts: number[] = [];
    for (let left = request.n; left > 0; left -= row.max_images_per_call) counts.push(Math.min(left, row.max_images_per_call));
    const results = await Promise.all(counts.map((n) => this.call(row, endpoint, request, { ...fields, n, size }, signal)));
    return results.flat();
  }

  private async call(
    row: OpenAIImageModel,
    endpoint: OpenAIImagesEndpoint,
    request: ProviderRequest,
    fields: Record<string, string | number>,
    signal: AbortSignal,
  ): Promise<ProviderImage[]> {
    const { provider, baseUrl, apiKey, publicOnly } = this.options;
    const url = `${baseUrl.replace(/\/$/, '')}/images/${endpoint}`;
    const auth = { Authorization: `Bearer ${apiKey}` };
    // GPT image models refuse `response_format` (always base64); dall-e-3 is asked for base64 so the gateway stores the bytes.
    const format = row.family === 'dall-e' ? { response_format: 'b64_json' } : {};
    let answer: JsonAnswer;
    if (endpoint === 'generations') {
      answer = await postJson(
        provider,
        url,
        { model: row.model, prompt: request.prompt, ...fields, ...format },
        auth,
        signal,
        publicOnly,
        request.onRequestSent,
      );
    } else {
      const parts: MultipartPart[] = [
        { name: 'model', value: row.model },
        { name: 'prompt', value: request.prompt },
        ...Object.entries({ ...fields, ...format }).map(([name, value]) => ({ name, value: String(value) })),
        ...(request.inputImages ?? []).map((image, i) => filePart('image[]', `image-${i + 1}`, image)),
        ...(request.mask ? [filePart('mask', 'mask', request.mask)] : []),
      ];
      answer = await postMultipart(provider, url, parts, auth, signal, publicOnly, request.onRequestSent);
    }
    const body = (answer.json ?? {}) as ImagesAnswer;
    if (answer.status !== 200 || body.error) throw openaiImagesError(provider, answer.status, body, answer.retryAfterMs);
    if (!Array.isArray(body.data) || body.data.length === 0) throw upstream.failed(provider, 'the answer has no images');
    const [width, height] = (/^\d+x\d+$/.test(body.size ?? '') ? body.size! : String(fields.size)).split('x').map(Number) as [number, number];
    const usage = tokenUsage(body.usage);
    // At most the `n` this call asked for: an image beyond it is one nobody pays for. The upstream made
    // (and bills) every image it answered: the ones not delivered are the operator's loss.
    const asked = Number(fields.n);
    if (body.data.length > asked) request.onBilled?.(body.data.length, asked);
    return body.data.slice(0, asked).map((item, index) => {
      if (!item.b64_json) throw upstream.failed(provider, 'an image has no b64_json');
      return { b64Json: item.b64_json, width, height, ...(index === 0 && usage ? { usage } : {}) };
    });
  }
}
