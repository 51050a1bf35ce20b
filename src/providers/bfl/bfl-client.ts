import { setTimeout as sleep } from 'node:timers/promises';
import { ApiError } from '../../errors/api-error';
import { failureOf, kindOf } from '../error-table';
import { seedFor } from '../model-spec';
import type { ProviderImage, ProviderRequest, WireClient } from '../provider';
import { afterAcceptance, callJson, postJson, refusedWithStatus, registerAccountSecrets, upstream, UpstreamError } from '../upstream-errors';
import { BFL_ERRORS } from './bfl-errors';
import { type BflModel, bflModel } from './bfl-models';

/**
 * Black Forest Labs' API (docs.bfl.ai, api.bfl.ai/openapi.json): `POST {base}/v1/{model}` with the
 * key as `x-key` answers `{id, polling_url}`; `GET polling_url` (same key) answers the task's
 * `status` until `Ready`, whose `result.sample` is a signed URL valid for 10 minutes. One image per
 * task. The polling URL names the region that took the task ("do not rebuild it or swap the host",
 * help.bfl.ai "Which API endpoint should I use?"), so it is the resume handle as BFL gave it.
 */
export interface BflClientOptions {
  provider: string;
  /** `https://api.bfl.ai`, a regional endpoint (`api.eu.bfl.ai`, `api.us.bfl.ai`) or a proxy's. */
  baseUrl: string;
  apiKey: string;
  pollIntervalMs: number;
  /** Connect to public addresses only (API channels unless CHANNEL_ALLOW_PRIVATE_UPSTREAMS). */
  publicOnly?: boolean;
}

/**
 * Where BFL's polling URLs may send the gateway (with the key) besides the account's own origin: its
 * regions' API hosts, all under bfl.ai ("allow the wildcard delivery.*.bfl.ai (or all of *.bfl.ai)
 * rather than individual regional hostnames, which can change", same page). `*.` matches subdomains.
 * Result samples carry no key: the images service downloads them from the descriptor's `resultHosts`.
 */
export const BFL_HOSTS: readonly string[] = ['*.bfl.ai'];

/** "Our signed URLs are only valid for 10 minutes" (docs.bfl.ai, FLUX1.1 [pro] page): a task's result outlives it by nothing more that is documented. */
export const BFL_RESULT_LIFE_MS = 10 * 60_000;

/** The model ids the client puts in a path: BFL's are lower-case words, digits, dots and dashes. */
const MODEL_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

interface BflSubmitAnswer {
  id?: unknown;
  polling_url?: unknown;
}

interface BflResultAnswer {
  id?: unknown;
  status?: unknown;
  result?: { sample?: unknown } | null;
  details?: unknown;
}

/** FastAPI's answers: `detail` a string, or a list of validation errors (422). */
interface BflErrorAnswer {
  detail?: string | Array<{ loc?: unknown[]; msg?: string; type?: string }>;
}

function describe(status: number, json: unknown): string {
  const detail = (json as BflErrorAnswer | null)?.detail;
  const text = Array.isArray(detail)
    ? detail.map((d) => `${Array.isArray(d.loc) ? d.loc.join('.') : ''}: ${d.msg ?? d.type ?? ''}`).join('; ')
    : (detail ?? '');
  return `HTTP ${status} ${typeof text === 'string' ? text : JSON.stringify(text)}`.replace(/\s+/g, ' ').trim().slice(0, 500);
}

/** The gateway's param for the field a validation error names (`loc: ["body", "width"]`). */
function paramOf(json: unknown): string | undefined {
  const detail = (json as BflErrorAnswer | null)?.detail;
  const field = Array.isArray(detail) && Array.isArray(detail[0]?.loc) ? detail[0]!.loc[1] : undefined;
  if (field === 'width' || field === 'height' || field === 'aspect_ratio') return 'size';
  if (typeof field === 'string' && field.startsWith('input_image')) return 'images';
  return field === 'prompt' || field === 'seed' ? field : undefined;
}

/** `hostname` under one of `patterns` (`*.bfl.ai`: any subdomain; else exactly). */
function onHosts(hostname: string, patterns: readonly string[]): boolean {
  return patterns.some((pattern) => (pattern.startsWith('*.') ? hostname.endsWith(pattern.slice(1)) : hostname === pattern));
}

function sizeFields(model: BflModel | undefined, request: ProviderRequest): Record<string, unknown> {
  if (model?.size.field === 'aspect_ratio') {
    const ratio = model.size.ratios[`${request.width}x${request.height}`];
    if (!ratio)
      throw new ApiError(
        'invalid_request',
        `Size ${request.width}x${request.height} is not one ${request.upstreamModel} makes (${Object.keys(model.size.ratios).join(', ')}).`,
        { param: 'size' },
      );
    return { aspect_ratio: ratio };
  }
  return { width: request.width, height: request.height };
}

/** `input_image`, `input_image_2`, … as base64 (the model's inputs are `inline`: bfl-models.ts). */
function referenceFields(request: ProviderRequest): Record<string, string> {
  if (request.mask)
    throw new ApiError(
      'internal_error',
      `BFL's models here take no mask (${request.upstreamModel}); the request should have been refused before it reached the provider.`,
    );
  return Object.fromEntries((request.inputImages ?? []).map((image, i) => [i === 0 ? 'input_image' : `input_image_${i + 1}`, image.bytes.toString('base64')]));
}

/** `output_format` as the model takes it (jpeg | png), from the client's own output options. */
function outputFormat(model: BflModel | undefined, request: ProviderRequest): { output_format?: string } {
  const asked = request.imageOptions?.output_format;
  if (!model?.spec.params.output_format || asked === undefined) return {};
  const format = asked === 'jpg' ? 'jpeg' : asked;
  return format === 'jpeg' || format === 'png' ? { output_format: format } : {};
}

/**
 * The submit body for the request's model (bfl-models.ts): the prompt, the size as the model takes
 * it, the seed, the reference images, the output format, then the catalog's `upstream_options` as
 * they are. A model the table does not know gets `width` / `height` and `seed + index`.
 */
export function submitBody(request: ProviderRequest, index: number): Record<string, unknown> {
  const model = bflModel(request.upstreamModel, request.upstreamFamily);
  const seed = seedFor(model?.spec, request.seed, index);
  return {
    prompt: request.prompt,
    ...sizeFields(model, request),
    ...referenceFields(request),
    ...(seed === undefined ? {} : { seed }),
    ...outputFormat(model, request),
    ...request.upstreamOptions,
  };
}

export class BflClient implements WireClient {
  private readonly base: URL;

  constructor(private readonly options: BflClientOptions) {
    registerAccountSecrets(options.apiKey);
    this.base = new URL(options.baseUrl);
  }

  /** One task per image; a resumed request polls its one task and never submits. */
  async generate(request: ProviderRequest, signal: AbortSignal): Promise<ProviderImage[]> {
    if (request.resumeTaskId !== undefined) return [await this.poll(request, request.resumeTaskId, signal)];
    return Promise.all(Array.from({ length: request.n }, (_, index) => this.generateOne(request, index, signal)));
  }

  private async generateOne(request: ProviderRequest, index: number, signal: AbortSignal): Promise<ProviderImage> {
    const pollingUrl = await this.submit(request, index, signal);
    // Stored before polling, so a process taking this generation over polls it instead of submitting again.
    if (request.onTaskAccepted) await request.onTaskAccepted(pollingUrl);
    return this.poll(request, pollingUrl, signal);
  }

  private get headers(): Record<string, string> {
    return { 'x-key': this.options.apiKey, accept: 'application/json' };
  }

  /** Submits one task; its polling URL is the only handle on work the account is now billed for. */
  async submit(request: ProviderRequest, index: number, signal: AbortSignal): Promise<string> {
    const { provider } = this.options;
    if (!MODEL_ID.test(request.upstreamModel)) {
      throw failureOf('configuration', provider, `"${request.upstreamModel}" is not a BFL model id (letters, digits, dots and dashes)`);
    }
    const url = `${this.options.baseUrl.replace(/\/+$/, '')}/v1/${request.upstreamModel}`;
    const answer = await postJson(provider, url, submitBody(request, index), this.headers, signal, this.options.publicOnly, request.onRequestSent);
    if (answer.status < 200 || answer.status > 299) throw this.httpError(answer.status, answer.json, answer.retryAfterMs);
    const pollingUrl = (answer.json as BflSubmitAnswer | null)?.polling_url;
    if (typeof pollingUrl !== 'string') throw upstream.failed(provider, 'the submit answer has no polling_url');
    // Checked before it is recorded: a handle the gateway would refuse to poll is no handle.
    this.trusted(pollingUrl, 'polling_url');
    return pollingUrl;
  }

  /**
   * Polls an accepted task to its end. The key goes with every poll, so the URL is followed only on
   * the account's own origin or BFL's hosts. A busy or transient answer only delays the next poll.
   */
  async poll(request: ProviderRequest, pollingUrl: string, signal: AbortSignal): Promise<ProviderImage> {
    const target = this.trusted(pollingUrl, 'polling_url');
    for (;;) {
      // Past the task's life the polling URL no longer answers for it: it is not asked again.
      request.beforePoll?.();
      const answer = await callJson(this.options.provider, 'GET', target, this.headers, signal, this.options.publicOnly).catch((error: unknown) => {
        throw error instanceof UpstreamError ? afterAcceptance(error) : error;
      });
      if (answer.status !== 200) {
        const error = this.httpError(answer.status, answer.json, answer.retryAfterMs);
        if (!error.retryable) throw afterAcceptance(error);
      } else {
        const result = (answer.json ?? {}) as BflResultAnswer;
        if (result.status === 'Ready') return this.image(result, request);
        if (result.status !== 'Pending') throw this.ended(result);
      }
      await sleep(this.options.pollIntervalMs, undefined, { signal });
    }
  }

  /**
   * The task's image: its signed URL, fetched and stored by the gateway at once (it lives 10 minutes),
   * only from the provider's result hosts (the descriptor's, and the operator's) or the account's own
   * host: the images service checks it, as for every provider.
   */
  private image(result: BflResultAnswer, request: ProviderRequest): ProviderImage {
    const sample = result.result?.sample;
    if (typeof sample !== 'string') throw upstream.failed(this.options.provider, `task ${String(result.id)} is Ready without result.sample`);
    return { url: sample, width: request.width, height: request.height };
  }

  /** A task that ended without an image: moderation by the error table, anything else a failure where it ran. */
  private ended(result: BflResultAnswer): UpstreamError {
    const status = typeof result.status === 'string' ? result.status : 'no status';
    const details = result.details === undefined || result.details === null ? '' : ` ${JSON.stringify(result.details).slice(0, 300)}`;
    const detail = `task ${String(result.id)} ended as ${status}${details}`;
    const kind = kindOf(BFL_ERRORS, status);
    return afterAcceptance(kind ? failureOf(kind, this.options.provider, detail) : upstream.failed(this.options.provider, detail));
  }

  /** Our error for an HTTP answer that is not a success, by the error table; a refused body (400 / 422) is the client's request. */
  private httpError(status: number, json: unknown, retryAfterMs: number | undefined): UpstreamError {
    const { provider } = this.options;
    const detail = describe(status, json);
    const kind = kindOf(BFL_ERRORS, `http_${status}`);
    if (kind) return failureOf(kind, provider, detail, { status, retryAfterMs });
    if (status === 400 || status === 422) {
      const param = paramOf(json);
      return new UpstreamError('invalid_request', `Provider ${provider} refused the request as invalid: ${detail}`, false, param ? { param } : {});
    }
    return upstream.failed(provider, detail, { safeElsewhere: refusedWithStatus(status) });
  }

  /**
   * A URL BFL answered, if the gateway may follow it: on the account's own origin (a regional or
   * proxy base URL, a fake), or https on BFL's hosts. Anything else would carry the key, or make the
   * gateway fetch, where the operator never pointed it (SSRF).
   */
  private trusted(raw: string, what: string): URL {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw upstream.failed(this.options.provider, `answered a ${what} that is not a URL`);
    }
    const ownOrigin = url.origin === this.base.origin;
    const bflHost = url.protocol === 'https:' && url.port === '' && onHosts(url.hostname, BFL_HOSTS);
    if ((!ownOrigin && !bflHost) || url.username !== '' || url.password !== '') {
      throw upstream.failed(this.options.provider, `answered a ${what} on ${url.host}, neither the account's own host nor BFL's: not followed`);
    }
    return url;
  }
}
