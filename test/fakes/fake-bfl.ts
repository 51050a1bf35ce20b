import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type ReceivedImage, sniff } from './input-images';
import { AccountCounters, readBody, sendJson, token, answering } from './scenario';
import { solidJpeg, solidPng } from './solid-images';

/**
 * A local stand-in for Black Forest Labs' API, kept apart from the gateway's tables on purpose.
 * Sources: BFL's API reference (docs.bfl.ai/api-reference, generated from api.bfl.ai/openapi.json),
 * docs.bfl.ai/api_integration/errors, docs.bfl.ai/api_integration/integration_guidelines and
 * help.bfl.ai "FLUX.2 Technical Specifications".
 * - `POST /v1/{model}` with `x-key` answers `{id, polling_url, cost, input_mp, output_mp}` (`cost` in
 *   credits of US$0.01: FLUX1.1 [pro] and Kontext [pro] 4 an image; FLUX.2 [pro] 3 for the first output
 *   megapixel and 1.5 for each further one and each input one, bfl.ai/pricing); the polling URL is the fake's
 *   own `GET /v1/get_result?id=…` (BFL's names the region that took the task: a client must poll it
 *   as given). No key: 403 "Not authenticated" (FastAPI's refusal of a missing `x-key`); a wrong one:
 *   401 (BFL does not document which of 401 / 403 it answers). A model it does not serve: 404.
 * - The body is checked against the model's schema and refused with FastAPI's 422
 *   `{detail: [{loc, msg, type}]}`: no prompt; FLUX1.1 [pro] `width` / `height` outside 256…1440 or
 *   not multiples of 32; FLUX.2 [pro] sides under 64, not multiples of 16, or over 4 MP; Kontext
 *   `aspect_ratio` outside 21:9…9:21; an `input_image` that is no image; `output_format` other than
 *   jpeg / png. Stricter than BFL (whose schemas ignore unknown fields): a field the model does not
 *   document is refused too, so a test sees the gateway send it.
 * - `GET /v1/get_result?id=` (with `x-key`) answers `{id, status, result, progress, details}`:
 *   `Pending`, then `Ready` with `result.sample`, a signed URL on `/results/{id}/sample.{jpeg|png}`
 *   (`se` expiry 10 minutes on, `sig` its HMAC) that serves the image: a real JPEG or PNG of the size
 *   the model made (FLUX1.1 [pro] and FLUX.2 [pro] `width` x `height`; Kontext its own about-1 MP size
 *   for the ratio, e.g. 1392 x 752 for 16:9, not the gateway's nominal one); a wrong or expired
 *   signature answers 403. An unknown id: `Task not found`.
 * Prompt tokens: [pending:K] K polls say Pending (default 1); [hold] Pending until releaseHeld();
 * [moderated:request] / [moderated:content] the task ends `Request Moderated` / `Content Moderated`;
 * [task-error] it ends `Error`; [lost] `Task not found`; [submit:STATUS] the submit answers that
 * status; [poll-error:STATUS:K] the first K polls answer that status; [foreign-polling] the polling
 * URL names another host (localhost for 127.0.0.1); [foreign-sample] so does the sample URL.
 */
export interface FakeBflSubmit {
  id: string;
  model: string;
  body: Record<string, unknown>;
  /** The reference images as BFL read them (`input_image`, `input_image_2`, …, base64). */
  images: ReceivedImage[];
}

export interface FakeBfl {
  url: string;
  /** Accepted tasks, in order. */
  submits: FakeBflSubmit[];
  /** Every submit that reached a model route, accepted or not (its body as sent). */
  received: Array<{ model: string; body: Record<string, unknown> }>;
  /** The task id of every poll, in order (unknown ids too). */
  polls: string[];
  /** The task id of every sample served. */
  downloads: string[];
  counters: AccountCounters;
  /** Called on each poll of a known task, before it is answered (a test may abort there). */
  onPoll?: (id: string, count: number) => void;
  /** Every submit answers `status` from now on (an account out of credits: 402), or as the prompt says again (undefined). */
  failSubmitsWith(status: number | undefined): void;
  /** Lets every task held by [hold] so far go on (later ones hold again). */
  releaseHeld(): void;
  /** Resolves once a task with [hold] is being polled. */
  whenHeld(): Promise<void>;
  close(): Promise<void>;
}

export interface FakeBflOptions {
  apiKey: string;
  /**
   * The host its sample URLs name, as BFL's `delivery-eu1.bfl.ai` (https): the test maps it back to
   * this fake. Unset: the fake's own host.
   */
  deliveryHost?: string;
}

/** What Kontext makes for each ratio: about 1 MP, its sides multiples of 16 (the fake's own table). */
const KONTEXT_OUTPUT: Record<string, [number, number]> = {
  '21:9': [1568, 672],
  '16:9': [1392, 752],
  '4:3': [1184, 880],
  '3:2': [1248, 832],
  '1:1': [1024, 1024],
  '2:3': [832, 1248],
  '3:4': [880, 1184],
  '9:16': [752, 1392],
  '9:21': [672, 1568],
};

interface ModelSchema {
  fields: readonly string[];
  /** Which reference fields it takes (`input_image`, `input_image_2`, …). */
  maxImages: number;
  /** Why its size fields are refused, or undefined. */
  size(body: Record<string, unknown>): { field: string; msg: string } | undefined;
  /** The size it makes for an accepted body. */
  output(body: Record<string, unknown>): [number, number];
  /** What a task costs, in credits. */
  cost(output: [number, number], inputMp: number): number;
  defaultFormat: 'jpeg' | 'png';
}

const sideOf = (value: unknown, fallback: number) => (Number.isInteger(value) ? (value as number) : fallback);
const megapixels = ([w, h]: [number, number]) => Math.round((w * h) / 10_000) / 100;

const inputFields = (count: number) => Array.from({ length: count }, (_, i) => (i === 0 ? 'input_image' : `input_image_${i + 1}`));
const COMMON = ['prompt', 'seed', 'output_format', 'webhook_url', 'webhook_secret', 'safety_tolerance'];

/** Why `width` / `height` break a model's side rules (FastAPI's messages), or undefined. */
function sideRefusal(body: Record<string, unknown>, rule: { defaults: [number, number]; min: number; max?: number; multiple: number; maxPixels?: number }) {
  const sides = [
    ['width', body.width ?? rule.defaults[0]],
    ['height', body.height ?? rule.defaults[1]],
  ] as const;
  for (const [field, value] of sides) {
    if (!Number.isInteger(value)) return { field, msg: 'Input should be a valid integer' };
    const side = value as number;
    if (side < rule.min || (rule.max !== undefined && side > rule.max))
      return { field, msg: `Input should be between ${rule.min} and ${rule.max ?? 'any'} (got ${side})` };
    if (side % rule.multiple !== 0) return { field, msg: `Input should be a multiple of ${rule.multiple}` };
  }
  const pixels = (sides[0][1] as number) * (sides[1][1] as number);
  return rule.maxPixels !== undefined && pixels > rule.maxPixels ? { field: 'width', msg: 'The output may be at most 4 megapixels' } : undefined;
}

const MODELS: Record<string, ModelSchema> = {
  // FLUX1.1 [pro]: width / height 256…1440, multiples of 32 (defaults 1024 x 768).
  'flux-pro-1.1': {
    fields: [...COMMON, 'image_prompt', 'width', 'height', 'prompt_upsampling'],
    maxImages: 0,
    defaultFormat: 'jpeg',
    size: (body) => sideRefusal(body, { defaults: [1024, 768], min: 256, max: 1440, multiple: 32 }),
    output: (body) => [sideOf(body.width, 1024), sideOf(body.height, 768)],
    cost: () => 4,
  },
  // FLUX.1 Kontext [pro]: aspect_ratio "between 21:9 and 9:21" (default 1:1), input_image … _4.
  'flux-kontext-pro': {
    fields: [...COMMON, ...inputFields(4), 'aspect_ratio', 'prompt_upsampling'],
    maxImages: 4,
    defaultFormat: 'png',
    size: (body) => {
      if (body.aspect_ratio === undefined || body.aspect_ratio === null) return undefined;
      const match = /^(\d+):(\d+)$/.exec(String(body.aspect_ratio));
      const ratio = match ? Number(match[1]) / Number(match[2]) : Number.NaN;
      return ratio >= 9 / 21 && ratio <= 21 / 9 ? undefined : { field: 'aspect_ratio', msg: 'Aspect ratio must be between 21:9 and 9:21' };
    },
    output: (body) => KONTEXT_OUTPUT[String(body.aspect_ratio ?? '1:1')] ?? [1024, 1024],
    cost: () => 4,
  },
  // FLUX.2 [pro]: sides ≥ 64 and multiples of 16, at most 4 MP (2048²); input_image … _8.
  'flux-2-pro': {
    fields: [...COMMON, ...inputFields(8), 'width', 'height'],
    maxImages: 8,
    defaultFormat: 'jpeg',
    size: (body) => sideRefusal(body, { defaults: [1024, 1024], min: 64, multiple: 16, maxPixels: 2048 * 2048 }),
    output: (body) => [sideOf(body.width, 1024), sideOf(body.height, 1024)],
    cost: (output, inputMp) => 3 + 1.5 * Math.max(0, Math.ceil(megapixels(output)) - 1) + 1.5 * Math.ceil(inputMp),
  },
};

interface Task {
  id: string;
  prompt: string;
  seed: number;
  format: 'jpeg' | 'png';
  width: number;
  height: number;
  polls: number;
  /** [hold]: Pending until releaseHeld(). */
  held: boolean;
  finished: () => void;
}

export async function startFakeBfl(options: FakeBflOptions, port = 0): Promise<FakeBfl> {
  const signingKey = randomBytes(16);
  const tasks = new Map<string, Task>();
  const submits: FakeBflSubmit[] = [];
  const received: FakeBfl['received'] = [];
  const polls: string[] = [];
  const downloads: string[] = [];
  const counters = new AccountCounters();
  const pollErrors = new Map<string, number>();
  let failSubmits: number | undefined;
  const heldWaiters: Array<() => void> = [];
  const sign = (id: string, expires: number) => createHmac('sha256', signingKey).update(`${id}:${expires}`).digest('hex');
  const invalid = (res: http.ServerResponse, field: string, msg: string, type = 'value_error') =>
    sendJson(res, 422, { detail: [{ loc: ['body', field], msg, type }] });

  let fake: FakeBfl;
  const server = http.createServer(
    answering(async (req, res) => {
      const raw = await readBody(req);
      const target = new URL(req.url ?? '/', 'http://fake');
      const ownOrigin = `http://${req.headers.host}`;
      const foreignOrigin = ownOrigin.replace('127.0.0.1', 'localhost');

      const sample = /^\/results\/([0-9a-f-]+)\/sample\.(jpeg|png)$/.exec(target.pathname);
      if (req.method === 'GET' && sample) {
        const id = sample[1]!;
        const expires = Number(target.searchParams.get('se'));
        if (target.searchParams.get('sig') !== sign(id, expires) || expires * 1000 < Date.now()) {
          res.writeHead(403, { 'Content-Type': 'application/xml' });
          return res.end('<Error><Code>AuthenticationFailed</Code></Error>');
        }
        downloads.push(id);
        const task = tasks.get(id);
        const [width, height] = task ? [task.width, task.height] : [1024, 1024];
        const bytes = sample[2] === 'png' ? solidPng(width, height) : solidJpeg(width, height);
        res.writeHead(200, { 'Content-Type': `image/${sample[2]}`, 'Content-Length': bytes.length });
        return res.end(bytes);
      }

      const key = req.headers['x-key'];
      if (key === undefined) return sendJson(res, 403, { detail: 'Not authenticated' });
      if (key !== options.apiKey) return sendJson(res, 401, { detail: 'Invalid API key' });

      if (req.method === 'GET' && target.pathname === '/v1/get_result') {
        const id = target.searchParams.get('id') ?? '';
        polls.push(id);
        const task = tasks.get(id);
        if (!task || token(task.prompt, 'lost') !== undefined)
          return sendJson(res, 200, { id, status: 'Task not found', result: null, progress: null, details: null });
        task.polls += 1;
        fake.onPoll?.(id, task.polls);
        const pollError = token(task.prompt, 'poll-error');
        if (pollError) {
          const [status, times] = pollError.split(':');
          const answered = pollErrors.get(id) ?? 0;
          if (answered < Number(times ?? 1)) {
            pollErrors.set(id, answered + 1);
            return sendJson(res, Number(status), { detail: `fake poll failure ${status}` });
          }
        }
        const pending = () => sendJson(res, 200, { id, status: 'Pending', result: null, progress: Math.min(0.9, task.polls / 10), details: null });
        if (task.held) {
          for (const notify of heldWaiters.splice(0)) notify();
          return pending();
        }
        if (task.polls <= Number(token(task.prompt, 'pending') ?? 1)) return pending();
        task.finished();
        const moderated = token(task.prompt, 'moderated');
        if (moderated === 'request')
          return sendJson(res, 200, {
            id,
            status: 'Request Moderated',
            result: null,
            progress: null,
            details: { 'Moderation Reasons': ['Derivative Works Filter'] },
          });
        if (moderated === 'content')
          return sendJson(res, 200, { id, status: 'Content Moderated', result: null, progress: null, details: { 'Moderation Reasons': ['NSFW'] } });
        if (token(task.prompt, 'task-error') !== undefined)
          return sendJson(res, 200, { id, status: 'Error', result: null, progress: null, details: { error: 'fake processing failure' } });
        const expires = Math.floor(Date.now() / 1000) + 600;
        const origin = options.deliveryHost
          ? `https://${options.deliveryHost}`
          : token(task.prompt, 'foreign-sample') !== undefined
            ? foreignOrigin
            : ownOrigin;
        const sampleUrl = `${origin}/results/${id}/sample.${task.format}?se=${expires}&sig=${sign(id, expires)}`;
        return sendJson(res, 200, {
          id,
          status: 'Ready',
          result: { sample: sampleUrl, prompt: task.prompt, seed: task.seed, start_time: Date.now() / 1000 - 2, end_time: Date.now() / 1000, duration: 2 },
          progress: null,
          details: null,
        });
      }

      const route = /^\/v1\/([A-Za-z0-9._-]+)$/.exec(target.pathname);
      if (req.method !== 'POST' || !route) return sendJson(res, 404, { detail: 'Not Found' });
      const model = route[1]!;
      const schema = MODELS[model];
      if (!schema) return sendJson(res, 404, { detail: 'Not Found' });
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(raw) as Record<string, unknown>;
      } catch {
        return sendJson(res, 422, { detail: [{ loc: ['body'], msg: 'JSON decode error', type: 'json_invalid' }] });
      }
      received.push({ model, body });
      const prompt = body.prompt;
      if (typeof prompt !== 'string' || prompt.length === 0) return invalid(res, 'prompt', 'Field required', 'missing');
      const forced = failSubmits ?? token(prompt, 'submit');
      if (forced) return sendJson(res, Number(forced), { detail: `fake submit answer ${forced}` });
      const undocumented = Object.keys(body).filter((field) => !schema.fields.includes(field));
      if (undocumented.length > 0) return invalid(res, undocumented[0]!, `Extra inputs are not permitted for ${model}`, 'extra_forbidden');
      const refusal = schema.size(body);
      if (refusal) return invalid(res, refusal.field, refusal.msg);
      if (body.seed !== undefined && body.seed !== null && !Number.isInteger(body.seed)) return invalid(res, 'seed', 'Input should be a valid integer');
      if (body.output_format !== undefined && body.output_format !== null && body.output_format !== 'jpeg' && body.output_format !== 'png') {
        return invalid(res, 'output_format', "Input should be 'jpeg' or 'png'", 'enum');
      }
      const images: ReceivedImage[] = [];
      for (const field of inputFields(schema.maxImages)) {
        const value = body[field];
        if (value === undefined || value === null) continue;
        const bytes = typeof value === 'string' && /^[A-Za-z0-9+/]+={0,2}$/.test(value) ? Buffer.from(value, 'base64') : Buffer.alloc(0);
        const image: ReceivedImage = { via: 'data-uri', bytes, ...sniff(bytes) };
        if (!image.format) return invalid(res, field, 'Input image could not be decoded (base64 image or URL expected)');
        images.push(image);
      }
      // "Limit of 2 for Image to Image" (Kontext's safety_tolerance).
      if (images.length > 0 && typeof body.safety_tolerance === 'number' && body.safety_tolerance > 2)
        return invalid(res, 'safety_tolerance', 'At most 2 with an input image');

      const id = randomUUID();
      const format = body.output_format === 'png' || body.output_format === 'jpeg' ? body.output_format : schema.defaultFormat;
      const [width, height] = schema.output(body);
      const inputMp = images.reduce((sum, image) => sum + megapixels([image.width ?? 0, image.height ?? 0]), 0);
      tasks.set(id, {
        id,
        prompt,
        seed: Number(body.seed ?? 0),
        format,
        width,
        height,
        polls: 0,
        held: token(prompt, 'hold') !== undefined,
        finished: counters.start(),
      });
      submits.push({ id, model, body, images });
      const origin = token(prompt, 'foreign-polling') !== undefined ? foreignOrigin : ownOrigin;
      return sendJson(res, 200, {
        id,
        polling_url: `${origin}/v1/get_result?id=${id}`,
        cost: schema.cost([width, height], inputMp),
        input_mp: Math.round(inputMp * 100) / 100,
        output_mp: megapixels([width, height]),
      });
    }),
  );
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  fake = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    submits,
    received,
    polls,
    downloads,
    counters,
    failSubmitsWith(status) {
      failSubmits = status;
    },
    releaseHeld() {
      for (const task of tasks.values()) task.held = false;
    },
    whenHeld: () => new Promise<void>((resolve) => heldWaiters.push(resolve)),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return fake;
}
