import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { isIP } from 'node:net';
import { type ReceivedImage, decodeDataUri, fetchInputImage } from './input-images';
import { AccountCounters, imageFileUrl, readBody, sendJson, serveImageFile, token, answering } from './scenario';

/**
 * A local stand-in for fal's queue (fal.ai/docs/api-reference/inference-api; the queue's OpenAPI
 * document fal.ai/docs/api-reference/inference-api/openapi/queue.json; …/inference-api/queue/cancel
 * and /result), kept apart from the gateway's tables on purpose:
 * - `POST /{owner}/{app}[/{path}]` with `Authorization: Key …` answers `{request_id, status, status_url,
 *   response_url, cancel_url}`; those URLs name the owner and app only, without the app's path, as
 *   fal's do (so a client that builds them itself polls the wrong place). A wrong key: 401 "No user
 *   found for Key ID and Secret"; an app it does not serve: 404.
 * - `GET …/requests/{id}/status`: 202 `IN_QUEUE` (with `queue_position`) / `IN_PROGRESS`, 200 `COMPLETED`.
 * - `GET …/requests/{id}`: the app's output, or its error with the app's status: a 422 with
 *   `detail: [{loc, msg, type}]` for input the app's schema refuses (checked when the request runs,
 *   as the app's own server does) or a content checker flags; platform errors as `{detail, error_type}`.
 * - `PUT …/requests/{id}/cancel`: a queued request is removed (202 CANCELLATION_REQUESTED), a running
 *   one is signalled (202, and runs on), a finished one answers 400 ALREADY_COMPLETED.
 * - Images are served from `/files/…` on the fake's own host, standing for fal's CDN, each a real PNG
 *   of the size the app made (Kontext: its own about-1 MP size for the ratio, not a size asked).
 * - A reference image (`image_url`, `image_urls`) is read as fal's runners read it, once the request
 *   runs: a data URI is decoded; a URL is downloaded from the internet, so one on a loopback, private
 *   or `localhost` address cannot be, and the request fails then (after it was queued and accepted)
 *   with fal's 422 `file_download_error` (docs.fal.ai, model-apis/errors). A public URL is handed to
 *   `fetchPublic` (there is no internet here: a test maps it to what it serves).
 * Prompt tokens: [queued:K] K status polls say IN_QUEUE (default 1); [running:K] then K say
 * IN_PROGRESS (default 1); [hold] stays IN_QUEUE until releaseHeld(); [error:TYPE:STATUS] the result is
 * a model error of that type and status; [platform:TYPE:STATUS] a platform error; [nsfw] the output is
 * flagged in `has_nsfw_concepts`; [submit:STATUS] the submit answers that status; [locked] 403 (the
 * account's balance is exhausted); [status-busy:K] the first K status polls answer 429; [foreign-status]
 * the status_url names another host; [extra-image] one image more than asked for.
 */
interface AppSchema {
  /** `image_size` ({width, height} ≤ 14142, or a preset) or `aspect_ratio` (these values). */
  size: 'image_size' | readonly string[];
  /** `image_url`: exactly one required. */
  imageUrl: boolean;
}

const ASPECT_RATIOS = ['21:9', '16:9', '4:3', '3:2', '1:1', '2:3', '3:4', '9:16', '9:21'];
const APPS: Record<string, AppSchema> = {
  'fal-ai/flux/dev': { size: 'image_size', imageUrl: false },
  'fal-ai/flux-pro/v1.1': { size: 'image_size', imageUrl: false },
  'fal-ai/flux-pro/kontext': { size: ASPECT_RATIOS, imageUrl: true },
};
const PRESETS: Record<string, [number, number]> = {
  square_hd: [1024, 1024],
  square: [512, 512],
  portrait_4_3: [768, 1024],
  portrait_16_9: [576, 1024],
  landscape_4_3: [1024, 768],
  landscape_16_9: [1024, 576],
};
/** What Kontext makes for each ratio (the fake's own about-1 MP sizes: the client must record these, not what it asked). */
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

export interface FakeFalSubmit {
  requestId: string;
  app: string;
  body: Record<string, unknown>;
  /** The reference images as the app read them (fetched URL or decoded data URI). */
  images: Array<ReceivedImage | undefined>;
}

interface QueuedRequest {
  id: string;
  /** owner/app: what the status, result and cancel URLs name. */
  root: string;
  app: string;
  body: Record<string, unknown>;
  prompt: string;
  images: Array<ReceivedImage | undefined>;
  queuedPolls: number;
  runningPolls: number;
  held: boolean;
  state: 'IN_QUEUE' | 'IN_PROGRESS' | 'COMPLETED' | 'CANCELLED';
  statusPolls: number;
  host: string;
  result?: { status: number; body: unknown };
}

export interface FakeFalOptions {
  apiKey: string;
  /** How a public (internet) reference URL is downloaded; by default fetched, which fails without internet. */
  fetchPublic?: (url: string) => Promise<ReceivedImage | undefined>;
  /**
   * The host its image URLs name, as fal's CDN (`v3.fal.media`, https): the test routes it back to this
   * fake. Unset: the fake's own host (what the account's own host serves is taken too).
   */
  cdnHost?: string;
}

/** Whether fal's runners, on the internet, could reach `url`'s host: not a loopback, private or link-local address, nor `localhost`. */
function reachableFromInternet(url: string): boolean {
  let host: string;
  try {
    host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return false;
  }
  if (host === 'localhost' || host.endsWith('.localhost') || host.endsWith('.local') || host.endsWith('.internal')) return false;
  if (isIP(host) === 4) {
    const [a, b] = host.split('.').map(Number) as [number, number];
    return !(
      a === 127 ||
      a === 10 ||
      a === 0 ||
      (a === 172 && b >= 16 && b <= 31) ||
      (a === 192 && b === 168) ||
      (a === 169 && b === 254) ||
      (a === 100 && b >= 64 && b <= 127)
    );
  }
  if (isIP(host) === 6) return !/^(::1?$|f[cd]|fe[89ab]|::ffff:)/i.test(host);
  return true;
}

export interface FakeFal {
  /** The queue's base URL, as FAL_BASE_URL / a channel's base_url take it. */
  url: string;
  /** Every accepted submit, in order. */
  submits: FakeFalSubmit[];
  /** Status polls per request id. */
  statusPolls: Map<string, number>;
  /** Request ids whose cancel_url was called while they were still queued (removed: never run). */
  cancelled: string[];
  /** Every cancel call, with what it answered. */
  cancelCalls: Array<{ requestId: string; answered: string }>;
  /** One entry per image made: what the account is billed for. */
  made: string[];
  counters: AccountCounters;
  setApiKey(apiKey: string): void;
  /** Lets every [hold] request leave the queue. */
  releaseHeld(): void;
  /** Called after each status poll with the state it answered (a test acts at a precise point). */
  onStatusPoll?: (requestId: string, status: string) => void;
  close(): Promise<void>;
}

const modelError = (type: string, loc: string[], msg: string) => ({ detail: [{ loc, msg, type }] });

/** Why the app's schema refuses this input (a 422 body), or undefined. */
function schemaFailure(schema: AppSchema, body: Record<string, unknown>, images: Array<ReceivedImage | undefined>): object | undefined {
  if (typeof body.prompt !== 'string') return modelError('missing', ['body', 'prompt'], 'Field required');
  const n = body.num_images ?? 1;
  if (!Number.isInteger(n) || (n as number) < 1 || (n as number) > 4)
    return modelError('less_than_equal', ['body', 'num_images'], 'Input should be less than or equal to 4');
  if (body.seed !== undefined && !Number.isInteger(body.seed)) return modelError('int_type', ['body', 'seed'], 'Input should be a valid integer');
  if (schema.size === 'image_size') {
    const size = body.image_size;
    if (size !== undefined && !(typeof size === 'string' && size in PRESETS)) {
      const { width, height } = (size ?? {}) as { width?: unknown; height?: unknown };
      if (typeof size !== 'object' || !Number.isInteger(width) || !Number.isInteger(height))
        return modelError('model_attributes_type', ['body', 'image_size'], 'Input should be a valid ImageSize or a preset');
      if ((width as number) > 14142 || (height as number) > 14142)
        return modelError('less_than_equal', ['body', 'image_size'], 'Input should be less than or equal to 14142');
    }
  } else if (body.aspect_ratio !== undefined && !schema.size.includes(String(body.aspect_ratio))) {
    return modelError('enum', ['body', 'aspect_ratio'], `Input should be ${schema.size.map((r) => `'${r}'`).join(', ')}`);
  }
  if (schema.imageUrl) {
    if (typeof body.image_url !== 'string') return modelError('missing', ['body', 'image_url'], 'Field required');
    const image = images[0];
    if (!image)
      return {
        detail: [
          {
            loc: ['body', 'image_url'],
            msg: 'Failed to download the file. Please check if the URL is accessible.',
            type: 'file_download_error',
            url: 'https://docs.fal.ai/errors#file_download_error',
            input: body.image_url,
          },
        ],
      };
    if (!image.format || !['png', 'jpeg', 'webp'].includes(image.format))
      return modelError(
        'image_load_error',
        ['body', 'image_url'],
        'Failed to load the image. Please ensure the image file is not corrupted and is in a supported format.',
      );
  }
  return undefined;
}

/** The output size for this input, as the app makes it. */
function outputSize(schema: AppSchema, body: Record<string, unknown>): [number, number] {
  if (schema.size !== 'image_size') return KONTEXT_OUTPUT[String(body.aspect_ratio ?? '1:1')] ?? [1024, 1024];
  const size = body.image_size;
  if (typeof size === 'string') return PRESETS[size]!;
  if (size && typeof size === 'object') return [(size as { width: number }).width, (size as { height: number }).height];
  return PRESETS.landscape_4_3!;
}

export async function startFakeFal(options: FakeFalOptions, port = 0): Promise<FakeFal> {
  const submits: FakeFalSubmit[] = [];
  const statusPolls = new Map<string, number>();
  const cancelled: string[] = [];
  const cancelCalls: Array<{ requestId: string; answered: string }> = [];
  const made: string[] = [];
  const counters = new AccountCounters();
  const requests = new Map<string, QueuedRequest>();
  const finishers = new Map<string, () => void>();
  let apiKey = options.apiKey;

  const urlsOf = (request: QueuedRequest) => {
    const base = `http://${request.host}/${request.root}/requests/${request.id}`;
    const foreign = token(request.prompt, 'foreign-status') !== undefined;
    return {
      request_id: request.id,
      status_url: foreign ? `http://elsewhere.invalid/${request.root}/requests/${request.id}/status` : `${base}/status`,
      response_url: base,
      cancel_url: `${base}/cancel`,
    };
  };

  /** The request runs: its result is decided now, and billed when it makes images. */
  const run = (request: QueuedRequest, req: http.IncomingMessage) => {
    const schema = APPS[request.app]!;
    const failure = schemaFailure(schema, request.body, request.images);
    const modelFailure = token(request.prompt, 'error');
    const platformFailure = token(request.prompt, 'platform');
    if (failure) request.result = { status: 422, body: failure };
    else if (modelFailure) {
      const [type, status] = modelFailure.split(':');
      request.result = { status: Number(status ?? 422), body: modelError(type ?? 'internal_server_error', ['body', 'prompt'], `fake ${type}`) };
    } else if (platformFailure) {
      const [type, status] = platformFailure.split(':');
      request.result = { status: Number(status ?? 503), body: { detail: `fake ${type}`, error_type: type } };
    } else {
      const n = Number(request.body.num_images ?? 1) + (token(request.prompt, 'extra-image') !== undefined ? 1 : 0);
      const [width, height] = outputSize(schema, request.body);
      const nsfw = token(request.prompt, 'nsfw') !== undefined;
      const images = Array.from({ length: n }, (_, i) => {
        made.push(request.prompt);
        const file = imageFileUrl(req, request.prompt, `${request.id}-${i}`, { width, height });
        const url = options.cdnHost ? file.replace(/^http:\/\/[^/]+/, `https://${options.cdnHost}`) : file;
        return { url, width, height, content_type: 'image/png' };
      });
      request.result = {
        status: 200,
        body: { images, timings: { inference: 0.5 }, seed: request.body.seed ?? 42, has_nsfw_concepts: images.map(() => nsfw), prompt: request.prompt },
      };
    }
  };

  const server = http.createServer(
    answering(async (req, res) => {
      if (serveImageFile(req, res)) return;
      const raw = await readBody(req);
      const path = (req.url ?? '').split('?')[0]!;
      const authorized = req.headers.authorization === `Key ${apiKey}`;
      const requestRoute = /^\/([^/]+\/[^/]+)\/requests\/([^/]+)(\/status|\/cancel)?$/.exec(path);
      if (requestRoute) {
        if (!authorized) return sendJson(res, 401, { detail: 'No user found for Key ID and Secret' });
        const [, root, id, tail] = requestRoute;
        const request = requests.get(id!);
        if (!request || request.root !== root) return sendJson(res, 404, { detail: `Request ${id} not found` });
        if (tail === '/cancel') {
          if (req.method !== 'PUT') return sendJson(res, 405, { detail: 'Method Not Allowed' });
          const queued = request.state === 'IN_QUEUE';
          // A running request is sent a cancellation signal the app may ignore (this fake's apps do).
          const answered = queued || request.state === 'IN_PROGRESS' ? 'CANCELLATION_REQUESTED' : 'ALREADY_COMPLETED';
          cancelCalls.push({ requestId: request.id, answered });
          if (!queued) return sendJson(res, answered === 'ALREADY_COMPLETED' ? 400 : 202, { status: answered });
          request.state = 'CANCELLED';
          cancelled.push(request.id);
          finishers.get(request.id)?.();
          return sendJson(res, 202, { status: answered });
        }
        if (req.method !== 'GET') return sendJson(res, 405, { detail: 'Method Not Allowed' });
        if (tail === '/status') {
          request.statusPolls += 1;
          statusPolls.set(request.id, request.statusPolls);
          const busy = Number(token(request.prompt, 'status-busy') ?? 0);
          if (request.statusPolls <= busy) return sendJson(res, 429, { detail: 'Too many requests' });
          if (request.state === 'IN_QUEUE' && !request.held) {
            if (request.queuedPolls > 0) request.queuedPolls -= 1;
            else request.state = 'IN_PROGRESS';
          }
          if (request.state === 'IN_PROGRESS') {
            if (request.runningPolls > 0) request.runningPolls -= 1;
            else {
              run(request, req);
              request.state = 'COMPLETED';
              finishers.get(request.id)?.();
            }
          }
          // A cancelled request reads as completed; its result is the cancellation.
          const status = request.state === 'CANCELLED' ? 'COMPLETED' : request.state;
          const body = {
            ...urlsOf(request),
            status,
            ...(status === 'IN_QUEUE' ? { queue_position: 0 } : {}),
            ...(status === 'COMPLETED' ? { logs: null, metrics: { inference_time: 0.5 } } : {}),
          };
          sendJson(res, status === 'COMPLETED' ? 200 : 202, body);
          fake.onStatusPoll?.(request.id, status);
          return;
        }
        if (request.state === 'CANCELLED') return sendJson(res, 400, { detail: 'Request was cancelled' });
        if (request.state !== 'COMPLETED' || !request.result) return sendJson(res, 400, { detail: 'Request is still in progress' });
        return sendJson(res, request.result.status, request.result.body);
      }

      const submit = /^\/([^/]+\/[^/]+)((?:\/[^/]+)*)$/.exec(path);
      if (req.method !== 'POST' || !submit) return sendJson(res, 404, { detail: 'Not Found' });
      if (!authorized) return sendJson(res, 401, { detail: 'No user found for Key ID and Secret' });
      const app = `${submit[1]}${submit[2]}`;
      if (!APPS[app]) return sendJson(res, 404, { detail: `Application '${app}' not found` });
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(raw) as Record<string, unknown>;
      } catch {
        return sendJson(res, 422, { detail: [{ loc: ['body'], msg: 'JSON decode error', type: 'json_invalid' }] });
      }
      const prompt = typeof body.prompt === 'string' ? body.prompt : '';
      if (token(prompt, 'locked') !== undefined)
        return sendJson(res, 403, { detail: 'User is locked. Reason: Exhausted balance. Top up your balance at fal.ai/dashboard/billing.' });
      const submitStatus = token(prompt, 'submit');
      if (submitStatus) return sendJson(res, Number(submitStatus), { detail: `fake ${submitStatus}` });
      const references =
        typeof body.image_url === 'string' ? [body.image_url] : Array.isArray(body.image_urls) ? (body.image_urls as unknown[]).map(String) : [];
      const download = (ref: string) => (reachableFromInternet(ref) ? (options.fetchPublic ?? fetchInputImage)(ref) : Promise.resolve(undefined));
      const images = await Promise.all(references.map((ref) => (ref.startsWith('data:') ? Promise.resolve(decodeDataUri(ref)) : download(ref))));
      const id = randomUUID();
      const request: QueuedRequest = {
        id,
        root: submit[1]!,
        app,
        body,
        prompt,
        images,
        queuedPolls: Number(token(prompt, 'queued') ?? 1),
        runningPolls: Number(token(prompt, 'running') ?? 1),
        held: token(prompt, 'hold') !== undefined,
        state: 'IN_QUEUE',
        statusPolls: 0,
        host: String(req.headers.host),
      };
      requests.set(id, request);
      finishers.set(id, counters.start());
      submits.push({ requestId: id, app, body, images });
      sendJson(res, 200, { ...urlsOf(request), status: 'IN_QUEUE', queue_position: 0 });
    }),
  );
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const fake: FakeFal = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    submits,
    statusPolls,
    cancelled,
    cancelCalls,
    made,
    counters,
    setApiKey(next) {
      apiKey = next;
    },
    releaseHeld() {
      for (const request of requests.values()) request.held = false;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return fake;
}
