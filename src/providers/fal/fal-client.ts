import { setTimeout as sleep } from 'node:timers/promises';
import { ApiError } from '../../errors/api-error';
import { urlProblem } from '../../shared/safe-url';
import { failureOf, kindOf } from '../error-table';
import { seedFor } from '../model-spec';
import type { ProviderImage, ProviderInputImage, ProviderRequest, WireClient } from '../provider';
import { afterAcceptance, callJson, type JsonAnswer, postJson, refusedWithStatus, registerAccountSecrets, upstream, UpstreamError } from '../upstream-errors';
import { FAL_ERRORS } from './fal-errors';
import { type FalApp, falApp } from './fal-models';

/**
 * fal's queue (fal.ai/docs/api-reference/inference-api, …/inference-api/queue/*): `POST {base}/{app}`
 * with `Authorization: Key …` answers `request_id` and the request's `status_url`, `response_url` and
 * `cancel_url`; the status answers 202 while `IN_QUEUE` / `IN_PROGRESS` and 200 once `COMPLETED`;
 * the response URL then answers the app's own output (or its error, with the app's status). The
 * images are URLs on fal's CDN, fetched and stored by the gateway as soon as they are returned.
 * `num_images` makes the request's `n` images in one request.
 */
export interface FalClientOptions {
  provider: string;
  /** The queue's base URL: `https://queue.fal.run`. */
  baseUrl: string;
  /** fal's key (`key_id:key_secret`), sent as `Authorization: Key …`. */
  apiKey: string;
  pollIntervalMs: number;
  /** Connect to public addresses only (API channels unless CHANNEL_ALLOW_PRIVATE_UPSTREAMS). */
  publicOnly?: boolean;
}

/**
 * The hosts fal's queue answers on besides the account's own base URL (a proxy in front of fal may
 * hand fal's URLs through): `queue.fal.run`, and `queue.falrun.com`, the backup host fal's OpenAPI
 * document names (fal.ai/docs/api-reference/inference-api/openapi/queue.json, `servers`).
 */
export const FAL_QUEUE_HOSTS: readonly string[] = ['queue.fal.run', 'queue.falrun.com'];

/** How long fal keeps a completed request's result: 1 hour (6 minutes when 10 KB or larger; an image result's URLs are far smaller). */
export const FAL_RESULT_LIFE_MS = 3_600_000;

/** A cancel is forwarded with a deadline of its own: the request's signal has already ended. */
const CANCEL_TIMEOUT_MS = 5_000;

/** What a takeover needs to poll (and cancel) an accepted request: the URLs fal answered, never rebuilt. */
export interface FalHandle {
  request_id: string;
  status_url: string;
  response_url: string;
  cancel_url: string;
}

/**
 * The resume handle (the task journal's `task_id`, at most 200 characters): the response URL alone
 * when the status and cancel URLs are it plus `/status` and `/cancel`, as fal answers them (so the
 * handle gives back exactly the URLs fal answered); all four fields as JSON otherwise.
 */
export function encodeHandle(handle: FalHandle): string {
  const { request_id, status_url, response_url, cancel_url } = handle;
  const derived = status_url === `${response_url}/status` && cancel_url === `${response_url}/cancel` && response_url.endsWith(`/${request_id}`);
  return derived ? response_url : JSON.stringify({ request_id, status_url, response_url, cancel_url });
}

export function decodeHandle(text: string | null): FalHandle {
  const refuse = () => new ApiError('internal_error', 'The stored fal request handle is not one this gateway wrote; the request is not sent again.');
  if (text === null || text.length === 0) throw refuse();
  if (!text.startsWith('{')) {
    const requestId = text.slice(text.lastIndexOf('/') + 1);
    if (!/^https?:\/\//.test(text) || requestId.length === 0) throw refuse();
    return { request_id: requestId, status_url: `${text}/status`, response_url: text, cancel_url: `${text}/cancel` };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw refuse();
  }
  const handle = value as Partial<FalHandle> | null;
  const fields = ['request_id', 'status_url', 'response_url', 'cancel_url'] as const;
  if (typeof handle !== 'object' || handle === null || fields.some((field) => typeof handle[field] !== 'string')) throw refuse();
  return handle as FalHandle;
}

interface FalQueueAnswer {
  request_id?: string;
  status?: string;
  status_url?: string;
  response_url?: string;
  cancel_url?: string;
}

interface FalErrorDetail {
  loc?: unknown[];
  msg?: string;
  type?: string;
}

/** A failed answer: a model error (`detail` a list of typed errors, or a string) or a platform one (`error_type`). */
interface FalErrorAnswer {
  detail?: string | FalErrorDetail[];
  error_type?: string;
}

interface FalImage {
  url?: string;
  width?: number;
  height?: number;
  content_type?: string;
}

interface FalResult {
  images?: FalImage[];
  has_nsfw_concepts?: boolean[];
}

/** The codes fal's error table is read by (fal-errors.ts), most specific first. */
function codesOf(status: number, answer: FalErrorAnswer): string[] {
  const types = Array.isArray(answer.detail) ? answer.detail.map((d) => d.type).filter((t): t is string => typeof t === 'string') : [];
  return [...(answer.error_type ? [answer.error_type] : []), ...types, `http_${status}`];
}

function describe(status: number, answer: FalErrorAnswer): string {
  const detail = Array.isArray(answer.detail)
    ? answer.detail.map((d) => `${d.type ?? ''} ${Array.isArray(d.loc) ? d.loc.join('.') : ''}: ${d.msg ?? ''}`).join('; ')
    : (answer.detail ?? '');
  return `HTTP ${status} ${answer.error_type ?? ''} ${detail}`.replace(/\s+/g, ' ').trim();
}

/** The request field a model error names (`loc: ["body", "image_url"]`), as the gateway's own param. */
function paramOf(answer: FalErrorAnswer): string | undefined {
  const loc = Array.isArray(answer.detail) ? answer.detail[0]?.loc : undefined;
  const field = Array.isArray(loc) ? loc[1] : undefined;
  if (field === 'image_url' || field === 'image_urls') return 'images';
  return typeof field === 'string' ? field : undefined;
}

/**
 * Our error for one of fal's failed answers, by its error table. A 422 no row covers is the client's
 * invalid request (fal's schema refused a value). `accepted`: the queue had taken the request, so no
 * failure may send it elsewhere (an account problem still disables the channel).
 */
export function falError(provider: string, status: number, answer: FalErrorAnswer, retryAfterMs: number | undefined, accepted: boolean): UpstreamError {
  const detail = describe(status, answer);
  const kind = codesOf(status, answer)
    .map((code) => kindOf(FAL_ERRORS, code))
    .find((found) => found !== undefined);
  let error: UpstreamError;
  if (kind === 'content') {
    const param = paramOf(answer);
    error = new UpstreamError('content_policy_violation', `Provider ${provider} refused the request: ${detail}`, false, {
      param: param === 'images' ? 'images' : 'prompt',
    });
  } else if (kind) {
    error = failureOf(kind, provider, detail, { status, retryAfterMs });
  } else if (status === 422) {
    const param = paramOf(answer);
    error = new UpstreamError('invalid_request', `Provider ${provider} refused the request as invalid: ${detail}`, false, param ? { param } : {});
  } else {
    error = upstream.failed(provider, detail, { safeElsewhere: refusedWithStatus(status) });
  }
  return accepted ? afterAcceptance(error) : error;
}

/**
 * An input as `image_url(s)` takes it: the gateway's signed URL when fal can download it (https on a
 * public address: fal's runners fetch it from the internet, whatever the gateway's own network
 * allows), else a data URI, which fal's apps take inline (docs.fal.ai, model-apis/fal-cdn, "Data URIs").
 */
export function inputReference(image: ProviderInputImage): string {
  if (image.url !== undefined && image.url.startsWith('https://') && urlProblem(image.url, false) === undefined) return image.url;
  return `data:${image.mimeType};base64,${image.bytes.toString('base64')}`;
}

function sizeFields(app: FalApp | undefined, request: ProviderRequest): Record<string, unknown> {
  if (app?.size.field === 'aspect_ratio') {
    const ratio = app.size.ratios[`${request.width}x${request.height}`];
    if (!ratio) throw new ApiError('invalid_request', `Size ${request.width}x${request.height} is not one ${request.upstreamModel} makes.`, { param: 'size' });
    return { aspect_ratio: ratio };
  }
  return { image_size: { width: request.width, height: request.height } };
}

function referenceFields(app: FalApp | undefined, request: ProviderRequest): Record<string, unknown> {
  const images = request.inputImages ?? [];
  // An app the table does not know gets the list form most of fal's image apps take.
  const references = app?.references ?? 'image_urls';
  if (references === 'image_url') {
    if (images.length !== 1) {
      throw new ApiError('invalid_request', `${request.upstreamModel} edits exactly one reference image (\`images\`); the request has ${images.length}.`, {
        param: 'images',
      });
    }
    return { image_url: inputReference(images[0]!) };
  }
  if (images.length === 0) return {};
  if (references === 'none') {
    throw new ApiError(
      'internal_error',
      `${request.upstreamModel} takes no reference image; the request should have been refused before it reached the provider.`,
    );
  }
  return { image_urls: images.map(inputReference) };
}

/**
 * The submit body for the request's app (fal-models.ts): the prompt, `num_images` = n, the size as
 * the app takes it, the seed, the reference images, then the catalog's `upstream_options` as they are.
 */
export function submitBody(request: ProviderRequest): Record<string, unknown> {
  if (request.mask)
    throw new ApiError(
      'internal_error',
      `fal's apps here take no mask (${request.upstreamModel}); the request should have been refused before it reached the provider.`,
    );
  const app = falApp(request.upstreamModel, request.upstreamFamily);
  const seed = seedFor(app?.spec, request.seed, 0);
  return {
    prompt: request.prompt,
    num_images: request.n,
    ...sizeFields(app, request),
    ...(seed === undefined ? {} : { seed }),
    ...referenceFields(app, request),
    ...request.upstreamOptions,
  };
}

export class FalClient implements WireClient {
  private readonly baseHost: string;
  private readonly authorization: Record<string, string>;

  constructor(private readonly options: FalClientOptions) {
    // fal's keys are `key_id:key_secret`: the secret alone is worth hiding too.
    registerAccountSecrets(options.apiKey, options.apiKey.slice(options.apiKey.indexOf(':') + 1));
    this.baseHost = new URL(options.baseUrl).host;
    this.authorization = { authorization: `Key ${options.apiKey}` };
  }

  async generate(request: ProviderRequest, signal: AbortSignal): Promise<ProviderImage[]> {
    if (request.resumeTaskId !== undefined) return this.poll(request, decodeHandle(request.resumeTaskId), signal);
    const handle = await this.submit(request, signal);
    // Stored before polling, so a process taking this generation over polls it instead of resubmitting.
    await request.onTaskAccepted?.(encodeHandle(handle));
    return this.poll(request, handle, signal);
  }

  /** Queues the request; from its answer on, the request exists (and is billed when it runs). */
  private async submit(request: ProviderRequest, signal: AbortSignal): Promise<FalHandle> {
    const { provider, baseUrl, publicOnly } = this.options;
    const body = submitBody(request);
    const url = `${baseUrl.replace(/\/+$/, '')}/${request.upstreamModel.split('/').map(encodeURIComponent).join('/')}`;
    const { status, json, retryAfterMs } = await postJson(provider, url, body, this.authorization, signal, publicOnly, request.onRequestSent);
    if (status < 200 || status > 299) throw falError(provider, status, (json ?? {}) as FalErrorAnswer, retryAfterMs, false);
    const answer = (json ?? {}) as FalQueueAnswer;
    const handle = { request_id: answer.request_id, status_url: answer.status_url, response_url: answer.response_url, cancel_url: answer.cancel_url };
    const missing = Object.entries(handle).find(([, value]) => typeof value !== 'string' || value.length === 0);
    if (missing) throw upstream.failed(provider, `the queue's answer has no ${missing[0]}`);
    return handle as FalHandle;
  }

  /**
   * A URL the queue handed back, followed only on the account's own host or fal's queue hosts (over
   * https): anything else would send the account's key, or a request, where the upstream says.
   */
  private trusted(text: string, what: string): URL {
    let url: URL | undefined;
    try {
      url = new URL(text);
    } catch {
      url = undefined;
    }
    const own = url?.host === this.baseHost && url.protocol === new URL(this.options.baseUrl).protocol;
    const fal = url?.protocol === 'https:' && FAL_QUEUE_HOSTS.includes(url.host);
    if (!url || url.username !== '' || url.password !== '' || !(own || fal)) {
      throw upstream.failed(
        this.options.provider,
        `the queue answered a ${what} on ${url?.host ?? 'no valid URL'}, neither the account's host (${this.baseHost}) nor fal's queue; it is not followed`,
      );
    }
    return url;
  }

  /**
   * Polls an accepted request to its end and reads its result. While it is still queued, an abort
   * (the client canceled, went away, the deadline passed) is forwarded to its `cancel_url` so that it
   * never runs; the abort is answered once the cancel was.
   */
  private async poll(request: ProviderRequest, handle: FalHandle, signal: AbortSignal): Promise<ProviderImage[]> {
    const { provider, pollIntervalMs } = this.options;
    const statusUrl = this.trusted(handle.status_url, 'status_url');
    const responseUrl = this.trusted(handle.response_url, 'response_url');
    let queued = true;
    let cancelling: Promise<void> | undefined;
    const onAbort = () => {
      if (queued) cancelling ??= this.cancel(handle);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      if (signal.aborted) onAbort();
      for (;;) {
        signal.throwIfAborted();
        // Past the request's life its result is gone: it is not asked again.
        request.beforePoll?.();
        const answer = await this.read(statusUrl, 'status', signal, handle.request_id);
        if (answer === undefined) {
          await sleep(pollIntervalMs, undefined, { signal });
          continue;
        }
        const status = (answer.json as FalQueueAnswer | null)?.status;
        if (status === 'COMPLETED') break;
        if (status !== 'IN_QUEUE' && status !== 'IN_PROGRESS') {
          throw upstream.failed(provider, `request ${handle.request_id} has status ${String(status)}`);
        }
        queued = status === 'IN_QUEUE';
        await sleep(pollIntervalMs, undefined, { signal });
      }
      queued = false;
      for (;;) {
        const answer = await this.read(responseUrl, 'result', signal, handle.request_id);
        if (answer !== undefined) return this.images(request, answer.json as FalResult | null, handle.request_id);
        await sleep(pollIntervalMs, undefined, { signal });
      }
    } catch (error) {
      if (!signal.aborted) throw error;
      await cancelling;
      throw signal.reason;
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  /**
   * One GET of an accepted request's URL: its answer, or undefined when the queue did not answer it
   * (busy, unreachable: poll again). A status URL's other failures, and every failure of the response
   * URL but a busy one (it answers the app's own error), end the request.
   */
  private async read(url: URL, phase: 'status' | 'result', signal: AbortSignal, requestId: string): Promise<JsonAnswer | undefined> {
    const { provider, publicOnly } = this.options;
    let answer: JsonAnswer;
    try {
      answer = await callJson(provider, 'GET', url, this.authorization, signal, publicOnly);
    } catch (error) {
      if (error instanceof UpstreamError && !signal.aborted && error.traits.safeElsewhere) return undefined;
      throw error instanceof UpstreamError ? afterAcceptance(error) : error;
    }
    // 202: still queued or running (a result read early is one too).
    if (answer.status === 202) return phase === 'status' ? answer : undefined;
    if (answer.status === 200) return answer;
    const failure = falError(provider, answer.status, (answer.json ?? {}) as FalErrorAnswer, answer.retryAfterMs, false);
    // The queue's own rate limit (429) delays any read; a status read's busy or 5xx answer too. A result
    // read's other answers are the app's final error (a runner that could not be scheduled included).
    if (answer.status === 429 || (phase === 'status' && failure.retryable)) return undefined;
    throw new UpstreamError(failure.code, `${failure.message} (request ${requestId} was accepted)`, false, {
      ...(failure.param === undefined ? {} : { param: failure.param }),
      accountProblem: failure.traits.accountProblem,
      statusCode: failure.traits.statusCode,
    });
  }

  /** PUT `cancel_url`, bounded by its own deadline; whatever it answers, the abort stands. */
  private async cancel(handle: FalHandle): Promise<void> {
    const { provider, publicOnly } = this.options;
    try {
      await callJson(provider, 'PUT', this.trusted(handle.cancel_url, 'cancel_url'), this.authorization, AbortSignal.timeout(CANCEL_TIMEOUT_MS), publicOnly);
    } catch {
      // Not reached or refused (already running or done): the request runs to its end upstream.
    }
  }

  private images(request: ProviderRequest, result: FalResult | null, requestId: string): ProviderImage[] {
    const { provider } = this.options;
    const flagged = (result?.has_nsfw_concepts ?? []).some((flag) => flag === true);
    if (flagged)
      throw falError(
        provider,
        200,
        { detail: [{ type: 'has_nsfw_concepts', loc: ['body'], msg: "the app's safety checker flagged a generated image" }] },
        undefined,
        true,
      );
    const images = (result?.images ?? []).filter((image) => typeof image.url === 'string' && image.url.length > 0);
    if (images.length === 0) throw upstream.failed(provider, `request ${requestId} completed without images`);
    // fal bills every image it made; one the request did not ask for is not delivered.
    if (images.length !== request.n) request.onBilled?.(images.length, Math.min(images.length, request.n));
    return images.slice(0, request.n).map((image) => {
      const size = { width: image.width ?? request.width, height: image.height ?? request.height };
      const inline = /^data:image\/[a-z+.-]+;base64,(.*)$/s.exec(image.url as string);
      return inline ? { b64Json: inline[1]!, ...size } : { url: image.url as string, ...size };
    });
  }
}
