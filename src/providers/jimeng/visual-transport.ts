import { setTimeout as sleep } from 'node:timers/promises';
import { ApiError } from '../../errors/api-error';
import type { ProviderImage, ProviderRequest } from '../provider';
import { failureOf, kindOf } from '../error-table';
import { findModelSpec, seedFor, type UpstreamModelParams } from '../model-spec';
import { postJson, refusedWithStatus, registerAccountSecrets, upstream, UpstreamError } from '../upstream-errors';
import { VISUAL_ERRORS } from './visual-errors';
import { VISUAL_MODELS } from './visual-models';
import { canonicalQueryString, signVolcRequest, type VolcCredentials } from './volc-signer';

/** Volcengine visual API (CVSync2Async): submit a task, then poll until it is done. */
export interface VisualTransportOptions {
  endpoint: string;
  credentials: VolcCredentials;
  pollIntervalMs: number;
  /** Connect to public addresses only (API channels unless CHANNEL_ALLOW_PRIVATE_UPSTREAMS). */
  publicOnly?: boolean;
}

const VERSION = '2022-08-31';
const PROVIDER = 'jimeng';

interface VisualAnswer {
  code?: number;
  message?: string;
  data?: { task_id?: string; status?: string; image_urls?: string[] | null; binary_data_base64?: string[] | null } | null;
  ResponseMetadata?: { Error?: { Code?: string; Message?: string } };
}

/**
 * 50511 / 50519: the generated image failed output moderation, which the API documents as
 * retryable: a new task may pass. The task itself is finished, so a new one is submitted.
 */
const REGENERATE_CODES = new Set([50511, 50519]);
/** Tasks in all for one image when the output keeps failing moderation (each failed one may be billed). */
const MODERATION_TASKS = 3;
/** Images a task delivers: each stands for one image of the request (generate runs n tasks). */
const TASK_IMAGES = 1;

/** output_moderated that a new task may not meet (50511 / 50519). */
class RegenerableModeration extends UpstreamError {
  constructor(provider: string, detail: string) {
    super('output_moderated', `Provider ${provider} withheld the generated image: ${detail}`);
  }
}

/** Our error for a visual API answer that is not a success (the error table in visual-errors.ts). */
function visualError(answer: VisualAnswer, httpStatus: number, retryAfterMs: number | undefined): UpstreamError {
  const gatewayError = answer.ResponseMetadata?.Error;
  if (gatewayError) {
    const detail = `the visual API refused the request (${gatewayError.Code}: ${gatewayError.Message})`;
    // The API gateway refused it before the visual service saw it: nothing was accepted.
    const account = kindOf(VISUAL_ERRORS, gatewayError.Code) === 'account' || httpStatus === 401 || httpStatus === 403;
    return upstream.failed(PROVIDER, detail, {
      safeElsewhere: true,
      ...(account ? { accountProblem: `${gatewayError.Code}: ${gatewayError.Message}`, statusCode: httpStatus } : {}),
    });
  }
  const code = answer.code;
  const detail = `${code ?? `HTTP ${httpStatus}`} ${answer.message ?? ''}`.trim();
  if (code !== undefined && REGENERATE_CODES.has(code)) return new RegenerableModeration(PROVIDER, detail);
  const kind = kindOf(VISUAL_ERRORS, code === undefined ? undefined : String(code));
  if (kind) return failureOf(kind, PROVIDER, detail, { status: httpStatus, retryAfterMs });
  // Any other answer may have come after acceptance; no code at all is a refusal when its status says so.
  return upstream.failed(PROVIDER, detail, { safeElsewhere: code === undefined && refusedWithStatus(httpStatus) });
}

/** The fields that widen Jimeng 4.0's ratio (default 1/3…3, up to 1/16…16), only for a request outside the defaults. */
function ratioBounds(request: ProviderRequest, bounds: UpstreamModelParams['ratio_bounds']): { min_ratio?: number; max_ratio?: number } {
  if (!bounds) return {};
  const ratio = request.width / request.height;
  if (ratio >= bounds.default_min && ratio <= bounds.default_max) return {};
  return { min_ratio: Math.min(bounds.default_min, ratio), max_ratio: Math.max(bounds.default_max, ratio) };
}

/**
 * The submit body: only the optional fields the req_key documents (upstream-models.ts). Jimeng 4.0
 * takes force_single (else it may bill several images) but no seed; 3.1 takes seed, not force_single.
 * A req_key the table does not know gets both: nothing says which it ignores, force_single keeps a
 * task from billing several images, and the seed keeps the image reproducible if it takes one.
 */
export function submitBody(request: ProviderRequest, index: number): Record<string, unknown> {
  const spec = findModelSpec(VISUAL_MODELS, request.upstreamModel, request.upstreamFamily);
  const params = spec?.params;
  const seed = seedFor(spec, request.seed, index);
  return {
    req_key: request.upstreamModel,
    ...imageUrls(request),
    prompt: request.prompt,
    width: request.width,
    height: request.height,
    ...ratioBounds(request, params?.ratio_bounds),
    ...(seed !== undefined ? { seed } : {}),
    ...(params === undefined || params.force_single ? { force_single: true } : {}),
    ...request.upstreamOptions,
  };
}

/**
 * `image_urls`: the visual API fetches its inputs itself (no inline form is documented), so each
 * input must carry the gateway's signed URL; the intake gives one to every input of a model whose
 * delivery is `url`. A missing one (or a mask, which no req_key here takes) is the gateway's own
 * fault, refused before anything is sent.
 */
function imageUrls(request: ProviderRequest): { image_urls?: string[] } {
  if (request.mask)
    throw new ApiError(
      'internal_error',
      `The visual API takes no mask (req_key ${request.upstreamModel}); the request should have been refused before it reached the provider.`,
    );
  const images = request.inputImages ?? [];
  if (images.length === 0) return {};
  return {
    image_urls: images.map((image, i) => {
      if (!image.url)
        throw new ApiError(
          'internal_error',
          `Input image ${i + 1} has no gateway URL: req_key ${request.upstreamModel} fetches its inputs by URL, so the gateway must sign one for each.`,
        );
      return image.url;
    }),
  };
}

/** The URL and headers of one signed call; the query is sent exactly as it was signed (one encoder for both). */
export function signedVisualRequest(
  endpoint: string,
  query: Record<string, string>,
  body: string,
  credentials: VolcCredentials,
  date?: Date,
): { url: string; headers: Record<string, string> } {
  const target = new URL(endpoint);
  const headers = signVolcRequest(
    { method: 'POST', host: target.host, path: target.pathname || '/', query, body, contentType: 'application/json', ...(date ? { date } : {}) },
    credentials,
  );
  target.search = canonicalQueryString(query);
  return { url: target.toString(), headers };
}

export class VisualTransport {
  constructor(private readonly options: VisualTransportOptions) {
    registerAccountSecrets(options.credentials.accessKeyId, options.credentials.secretAccessKey);
  }

  private async call(action: string, body: Record<string, unknown>, signal: AbortSignal, onSent?: () => void): Promise<VisualAnswer> {
    const text = JSON.stringify(body);
    const { url, headers } = signedVisualRequest(this.options.endpoint, { Action: action, Version: VERSION }, text, this.options.credentials);
    const { status, json, retryAfterMs } = await postJson(PROVIDER, url, text, headers, signal, this.options.publicOnly, onSent);
    const answer = (json ?? {}) as VisualAnswer;
    if (answer.code !== 10000) throw visualError(answer, status, retryAfterMs);
    return answer;
  }

  /** One image per task (force_single), tasks for several images run side by side. */
  async generate(request: ProviderRequest, signal: AbortSignal): Promise<ProviderImage[]> {
    const tasks = Array.from({ length: request.n }, (_, index) => this.generateOne(request, index, signal));
    return (await Promise.all(tasks)).flat();
  }

  private async generateOne(request: ProviderRequest, index: number, signal: AbortSignal): Promise<ProviderImage[]> {
    let taskId = request.resumeTaskId ?? (await this.submit(request, index, signal));
    if (request.resumeTaskId === undefined && request.onTaskAccepted) {
      // Stored before polling, so a process taking this generation over polls it instead of resubmitting.
      await request.onTaskAccepted(taskId);
    }
    for (let tasks = 1; ; tasks += 1) {
      try {
        return await this.poll(request, taskId, signal);
      } catch (error) {
        // A resumed task has no journal callback here: a new task could not be recorded, so none is sent.
        if (!(error instanceof RegenerableModeration) || request.resumeTaskId !== undefined || tasks >= MODERATION_TASKS) throw error;
        taskId = await this.submit(request, index, signal);
        if (request.onTaskAccepted) await request.onTaskAccepted(taskId);
      }
    }
  }

  /** Submits one task; its id is the only handle on work the account is now billed for. */
  async submit(request: ProviderRequest, index: number, signal: AbortSignal): Promise<string> {
    const submitted = await this.call('CVSync2AsyncSubmitTask', submitBody(request, index), signal, request.onRequestSent);
    const taskId = submitted.data?.task_id;
    if (!taskId) throw upstream.failed(PROVIDER, 'the submit answer has no task_id');
    return taskId;
  }

  /**
   * Polls an accepted task to its end. From submission on the task exists (and is billed): it is
   * polled on this account, and no failure may send the request elsewhere.
   */
  async poll(request: ProviderRequest, taskId: string, signal: AbortSignal): Promise<ProviderImage[]> {
    const reqKey = request.upstreamModel;
    const reqJson = JSON.stringify({ return_url: request.responseFormat === 'url' });
    for (;;) {
      // Past the task's life (12 h) the API answers not_found: it is not asked again.
      request.beforePoll?.();
      let answer: VisualAnswer;
      try {
        answer = await this.call('CVSync2AsyncGetResult', { req_key: reqKey, task_id: taskId, req_json: reqJson }, signal);
      } catch (error) {
        if (!(error instanceof UpstreamError) || error instanceof RegenerableModeration) throw error;
        // A busy answer to a poll only delays the poll.
        if (error.retryable) {
          await sleep(this.options.pollIntervalMs, undefined, { signal });
          continue;
        }
        throw new UpstreamError(error.code, `${error.message} (task ${taskId} was accepted)`, false, { param: error.param, safeElsewhere: false });
      }
      const status = answer.data?.status;
      if (status === 'done') return this.images(answer, request);
      if (status !== 'in_queue' && status !== 'generating') throw upstream.failed(PROVIDER, `task ${taskId} ended as ${status ?? 'unknown'}`);
      await sleep(this.options.pollIntervalMs, undefined, { signal });
    }
  }

  /**
   * The task's one image: an image beyond it (4.0 without force_single, or a misbehaving answer) is one
   * nobody pays for. The API bills every image a task returns: the ones not delivered are the operator's loss.
   */
  private images(answer: VisualAnswer, request: ProviderRequest): ProviderImage[] {
    const size = { width: request.width, height: request.height };
    const urlForm = request.responseFormat === 'url';
    const field = urlForm ? 'image_urls' : 'binary_data_base64';
    const made = (urlForm ? answer.data?.image_urls : answer.data?.binary_data_base64) ?? [];
    if (made.length === 0) throw upstream.failed(PROVIDER, `the finished task has no ${field}`);
    if (made.length > TASK_IMAGES) request.onBilled?.(made.length, TASK_IMAGES);
    return made.slice(0, TASK_IMAGES).map((image) => (urlForm ? { url: image, ...size } : { b64Json: image, ...size }));
  }
}
