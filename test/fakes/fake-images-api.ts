import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type ReceivedImage, decodeDataUri, fetchInputImage } from './input-images';
import { AccountCounters, TINY_PNG_B64, delay, imageFileUrl, readBody, sendJson, serveImageFile, sizeOf, token, answering } from './scenario';
import { solidPngB64 } from './solid-images';

/**
 * A local stand-in for an OpenAI-style images API: Volcengine Ark (`flavour: 'ark'`, one image
 * per call, size echoed) or OpenAI (`'openai'`, honours n, revised_prompt). Checks the Bearer key.
 * Behaviour per prompt token: [error:CODE:STATUS] an error answer; [busy:K] the first K calls of that
 * prompt answer 429; [garbage] a non-JSON body; [slow:MS] answers late; [hold] waits for releaseHeld();
 * [hold:TAG] waits for releaseHeld(TAG) (or releaseHeld()); [echo:CODE:STATUS] an error answer whose message
 * echoes the Authorization header and the key (a hostile or careless upstream); [empty] no images; [image:KIND] a misbehaving
 * image file (scenario.ts serveImageFile); [b64:html] / [b64:huge] a base64 answer that is not an image / is 1 MB;
 * [billed:N] Ark's `usage.generated_images` is N; [quote-prompt:CODE:STATUS] an error answer whose message quotes the prompt;
 * [extra-images:K] K images more than asked (`n`, or Ark's one). Image URLs point at the fake itself (GET /files/...).
 * Every image is a real PNG of the size made (`size`, Ark's `1K`/`2K`/`4K` as squares, `adaptive` the input's).
 */
/** The base64 image of an answer: a PNG of the size made, or a misbehaving one ([b64:html], [b64:huge]). */
function b64Image(kind: string | undefined, size: { width: number; height: number }): string {
  if (kind === 'html') return Buffer.from('<html><body>not an image</body></html>').toString('base64');
  if (kind === 'huge') return Buffer.concat([Buffer.from(TINY_PNG_B64, 'base64'), Buffer.alloc(1024 * 1024)]).toString('base64');
  return solidPngB64(size.width, size.height);
}

const SIZE_WORDS: Record<string, number> = { '1K': 1024, '2K': 2048, '4K': 4096 };

/**
 * Ark's documented models (BytePlus "Image generation API", docs.byteplus.com/en/docs/ModelArk/1541523;
 * volcengine.com/docs/82379/1541523), kept apart from the gateway's table on purpose, by the model id
 * without its `doubao-` prefix (BytePlus ids have none): the sizes each takes (total pixels, width /
 * height within 1/16…16; SeedEdit 3.0 only `adaptive`), the optional fields each reads, and its
 * input images. Group output (`sequential_image_generation`), `stream` and `optimize_prompt_options`
 * only for 5.0 lite / 4.5 / 4.0; `output_format` and `tools` only for 5.0 lite; `seed` and
 * `guidance_scale` only for Seedream 3.0 t2i and SeedEdit 3.0.
 */
interface ArkModelDoc {
  pattern: RegExp;
  sizes: { minPixels: number; maxPixels: number } | 'adaptive';
  fields: string[];
  inputs?: { maxImages: number; formats: string[]; minRatio: number; maxRatio: number };
}
const ARK_COMMON_FIELDS = ['model', 'prompt', 'image', 'size', 'response_format', 'watermark'];
const SEEDREAM_4_FIELDS = ['sequential_image_generation', 'sequential_image_generation_options', 'stream', 'optimize_prompt_options'];
const SEEDREAM_4_INPUTS = { maxImages: 14, formats: ['jpeg', 'png', 'webp', 'bmp', 'tiff', 'gif'], minRatio: 1 / 16, maxRatio: 16 };
const ARK_MODELS: ArkModelDoc[] = [
  {
    pattern: /^seedream-5-0-(lite-)?260128$/,
    sizes: { minPixels: 3_686_400, maxPixels: 10_404_496 },
    fields: [...SEEDREAM_4_FIELDS, 'output_format', 'tools'],
    inputs: SEEDREAM_4_INPUTS,
  },
  { pattern: /^seedream-4-5-/, sizes: { minPixels: 3_686_400, maxPixels: 16_777_216 }, fields: SEEDREAM_4_FIELDS, inputs: SEEDREAM_4_INPUTS },
  { pattern: /^seedream-4-0-/, sizes: { minPixels: 921_600, maxPixels: 16_777_216 }, fields: SEEDREAM_4_FIELDS, inputs: SEEDREAM_4_INPUTS },
  { pattern: /^seedream-3-0-t2i-/, sizes: { minPixels: 512 * 512, maxPixels: 2048 * 2048 }, fields: ['seed', 'guidance_scale'] },
  {
    pattern: /^seededit-3-0-i2i-/,
    sizes: 'adaptive',
    fields: ['seed', 'guidance_scale'],
    inputs: { maxImages: 1, formats: ['jpeg', 'png'], minRatio: 1 / 3, maxRatio: 3 },
  },
];

/** The documented model an id names: a Volcengine id (`doubao-…`), a BytePlus id (none), or one of the account's endpoints (`ep-…`). */
function arkModel(model: string, endpoints: Record<string, string>): ArkModelDoc | undefined {
  const bare = (endpoints[model] ?? model).replace(/^doubao-/, '');
  return ARK_MODELS.find((doc) => doc.pattern.test(bare));
}

/**
 * Stricter than Ark (which ignores what a model does not read): a field the model does not
 * document is refused, so a test sees the gateway send it.
 */
function arkUndocumented(doc: ArkModelDoc | undefined, body: Record<string, unknown>): string[] {
  if (!doc) return [];
  return Object.keys(body).filter((field) => !ARK_COMMON_FIELDS.includes(field) && !doc.fields.includes(field));
}

function arkSizeRefusal(doc: ArkModelDoc | undefined, size: string): string | undefined {
  if (!doc) return undefined;
  // SeedEdit 3.0: "Only support adaptive for now".
  if (doc.sizes === 'adaptive')
    return size === 'adaptive' ? undefined : 'The parameter `size` specified in the request is not valid: only adaptive is supported for this model.';
  const match = /^(\d+)x(\d+)$/.exec(size);
  if (!match) return undefined;
  const width = Number(match[1]);
  const height = Number(match[2]);
  const pixels = width * height;
  const ratio = width / height;
  if (pixels >= doc.sizes.minPixels && pixels <= doc.sizes.maxPixels && ratio >= 1 / 16 && ratio <= 16) return undefined;
  return `The parameter \`size\` specified in the request is not valid: image size must be within [${doc.sizes.minPixels}, ${doc.sizes.maxPixels}] pixels and its aspect ratio within [1/16, 16].`;
}

const ARK_INPUT_MAX_BYTES = 10 * 1000 * 1000;
const ARK_INPUT_MAX_PIXELS = 6000 * 6000;

/** Why Ark would refuse these input images, or undefined when it takes them. */
function arkInputRefusal(model: string, doc: ArkModelDoc | undefined, images: Array<ReceivedImage | undefined>): string | undefined {
  const spec = doc?.inputs;
  if (!spec) return `model ${model} does not support the parameter \`image\``;
  if (images.length === 0 || images.length > spec.maxImages) return `\`image\` takes 1 to ${spec.maxImages} images for ${model} (got ${images.length})`;
  // Reference images + outputs ≤ 15; one output per call without group output.
  if (images.length + 1 > 15) return 'the number of reference images plus generated images must not exceed 15';
  for (const [i, image] of images.entries()) {
    if (!image) return `image ${i}: not a data:image/<format>;base64 URI or a URL serving an image`;
    if (image.declared !== undefined && image.declared !== image.declared.toLowerCase()) return `image ${i}: the format in the data URI must be lower case`;
    if (!image.format || !spec.formats.includes(image.format))
      return `image ${i}: format ${image.format ?? 'unknown'} is not supported (${spec.formats.join(', ')})`;
    if (image.bytes.length > ARK_INPUT_MAX_BYTES) return `image ${i}: larger than 10 MB`;
    if (image.width !== undefined && image.height !== undefined) {
      const ratio = image.width / image.height;
      if (image.width <= 14 || image.height <= 14) return `image ${i}: width and height must be more than 14 px`;
      if (ratio < spec.minRatio || ratio > spec.maxRatio) return `image ${i}: aspect ratio out of range`;
      if (image.width * image.height > ARK_INPUT_MAX_PIXELS) return `image ${i}: more than 6000x6000 pixels`;
    }
  }
  return undefined;
}

/** An `image` field's items, decoded (data URIs) or fetched (URLs); undefined for an item that is neither or serves no image. */
async function receiveImages(field: unknown): Promise<Array<ReceivedImage | undefined>> {
  const items = Array.isArray(field) ? field : [field];
  return Promise.all(
    items.map(async (item) => {
      if (typeof item !== 'string') return undefined;
      if (item.startsWith('data:')) return decodeDataUri(item);
      return /^https?:\/\//.test(item) ? fetchInputImage(item) : undefined;
    }),
  );
}

export interface FakeImagesApi {
  url: string;
  requests: Array<Record<string, unknown>>;
  /** The input images of each call that had an `image` field (and its `mask`), as the upstream read them. */
  inputs: Array<{ prompt: string; images: Array<ReceivedImage | undefined>; mask?: ReceivedImage | undefined }>;
  /** The prompt of each call answered with images, one entry per image: what a real upstream bills, whether or not the caller still listened. */
  made: string[];
  /** Load seen by this account (authenticated calls only). */
  counters: AccountCounters;
  /** When each call with a wrong key arrived (answered 401). */
  unauthorizedAt: number[];
  /** Revokes the key (401 from now on) or changes it. */
  setApiKey(apiKey: string): void;
  /**
   * 'busy': every call answers 429 with Retry-After; 'failing': 500; 'echo': 401 whose message echoes the
   * Authorization header and the key; 'normal' by prompt tokens.
   */
  setMode(mode: Mode): void;
  /** Answers every request that carries [hold] or [hold:TAG] and is still waiting; with a tag, only those with [hold:TAG]. */
  releaseHeld(tag?: string): void;
  /** Resolves once a request with [hold:TAG] is waiting here (so the gateway has reserved its credits). */
  whenHeld(tag: string): Promise<void>;
  close(): Promise<void>;
}

type Mode = 'normal' | 'busy' | 'failing' | 'echo';

export interface FakeImagesApiOptions {
  apiKey: string;
  flavour: 'ark' | 'openai';
  /** Ark: the account's endpoints (`ep-…`) and the model each serves; `model` may name one. */
  endpoints?: Record<string, string>;
}

export async function startFakeImagesApi(options: FakeImagesApiOptions, port = 0): Promise<FakeImagesApi> {
  const endpoints = options.endpoints ?? {};
  const requests: Array<Record<string, unknown>> = [];
  const inputs: FakeImagesApi['inputs'] = [];
  const made: string[] = [];
  const counters = new AccountCounters();
  const unauthorizedAt: number[] = [];
  let apiKey = options.apiKey;
  let mode: Mode = 'normal';
  const busyCounts = new Map<string, number>();
  let held: Array<{ tag: string; release: () => void }> = [];
  const heldWaiters: Array<{ tag: string; notify: () => void }> = [];
  const error = (res: http.ServerResponse, status: number, code: string, message: string) =>
    sendJson(res, status, { error: { code, message, param: status === 400 ? 'prompt' : null, type: status === 400 ? 'BadRequest' : 'ServerError' } });

  const server = http.createServer(
    answering(async (req, res) => {
      const raw = await readBody(req);
      if (serveImageFile(req, res)) return;
      if (req.method !== 'POST' || !req.url?.endsWith('/images/generations')) return error(res, 404, 'NotFound', 'no such route');
      if (req.headers.authorization !== `Bearer ${apiKey}`) {
        unauthorizedAt.push(Date.now());
        return error(res, 401, 'AuthenticationError', 'The API key is invalid');
      }
      const body = JSON.parse(raw) as Record<string, unknown>;
      requests.push(body);
      const finished = counters.start();
      res.once('close', finished);
      if (mode === 'busy') {
        res.setHeader('Retry-After', '30');
        return error(res, 429, 'RateLimitExceeded.EndpointRPMExceeded', 'Too many requests');
      }
      if (mode === 'failing') return error(res, 500, 'InternalServiceError', 'fake outage');
      const echoed = `you sent Authorization: ${req.headers.authorization}; api_key=${apiKey}; raw ${apiKey}`;
      if (mode === 'echo') return error(res, 401, 'AuthenticationError', echoed);
      const prompt = String(body.prompt ?? '');
      const echo = token(prompt, 'echo');
      if (echo !== undefined) {
        const [code, status] = echo.split(':');
        return error(res, Number(status ?? 500), code ?? 'InternalServiceError', echoed);
      }
      // Upstreams quote the request in some errors ("The prompt ... is invalid"): the gateway must not log it.
      const quoting = token(prompt, 'quote-prompt');
      if (quoting !== undefined) {
        const [code, status] = quoting.split(':');
        return error(res, Number(status ?? 500), code ?? 'InternalServiceError', `the prompt "${prompt}" could not be processed`);
      }
      const slow = token(prompt, 'slow');
      if (slow) await delay(Number(slow));
      const holdTag = token(prompt, 'hold');
      if (holdTag !== undefined) {
        await new Promise<void>((resolve) => {
          held.push({ tag: holdTag, release: resolve });
          for (const waiter of heldWaiters.filter((w) => w.tag === holdTag)) {
            heldWaiters.splice(heldWaiters.indexOf(waiter), 1);
            waiter.notify();
          }
        });
      }
      if (token(prompt, 'garbage') !== undefined) {
        res.writeHead(502, { 'Content-Type': 'text/html' });
        return res.end('<html>bad gateway</html>');
      }
      const failure = token(prompt, 'error');
      if (failure) {
        const [code, status] = failure.split(':');
        return error(res, Number(status ?? 400), code ?? 'BadRequest', `fake ${code}`);
      }
      const busy = Number(token(prompt, 'busy') ?? 0);
      const seen = busyCounts.get(prompt) ?? 0;
      if (seen < busy) {
        busyCounts.set(prompt, seen + 1);
        return error(res, 429, options.flavour === 'ark' ? 'RateLimitExceeded.EndpointRPMExceeded' : 'rate_limit_exceeded', 'Too many requests');
      }
      const size = String(body.size ?? '1024x1024');
      const doc = options.flavour === 'ark' ? arkModel(String(body.model), endpoints) : undefined;
      const undocumented = arkUndocumented(doc, body);
      if (undocumented.length > 0) {
        return sendJson(res, 400, {
          error: {
            code: 'InvalidParameter',
            message: `undocumented field(s) for ${String(body.model)}: ${undocumented.join(', ')}`,
            param: undocumented[0],
            type: 'BadRequest',
          },
        });
      }
      const badSize = arkSizeRefusal(doc, size);
      if (badSize) return sendJson(res, 400, { error: { code: 'InvalidParameter', message: badSize, param: 'size', type: 'BadRequest' } });
      let images: Array<ReceivedImage | undefined> = [];
      if (body.image !== undefined || body.mask !== undefined) {
        images = body.image === undefined ? [] : await receiveImages(body.image);
        const mask = body.mask === undefined ? undefined : (await receiveImages(body.mask))[0];
        inputs.push({ prompt, images, ...(body.mask === undefined ? {} : { mask }) });
        // Ark has no `mask` (refused above as undocumented); an OpenAI-compatible server reads both as images.
        const received = body.mask === undefined ? images : [...images, mask];
        const badImage =
          options.flavour === 'ark'
            ? arkInputRefusal(String(body.model), doc, images)
            : received.some((image) => !image?.format)
              ? 'an input is not an image'
              : undefined;
        if (badImage)
          return sendJson(res, 400, {
            error: {
              code: 'InvalidParameter',
              message: `The parameter \`image\` specified in the request is not valid: ${badImage}.`,
              param: 'image',
              type: 'BadRequest',
            },
          });
      }
      // `adaptive`: the output follows the input image, and the answer names its size as the doc writes it (`2048×2048`).
      const first = images[0];
      const madeSize = size === 'adaptive' && first?.width !== undefined && first.height !== undefined ? `${first.width}×${first.height}` : size;
      const side = SIZE_WORDS[madeSize];
      const pixels = sizeOf(madeSize) ?? (side ? { width: side, height: side } : { width: 1024, height: 1024 });
      const asked = options.flavour === 'ark' ? 1 : Number(body.n ?? 1);
      // [deliver:N]: N images whatever was asked (an upstream that makes fewer than `n`).
      const delivering = token(prompt, 'deliver');
      const count =
        token(prompt, 'empty') !== undefined ? 0 : delivering !== undefined ? Number(delivering) : asked + Number(token(prompt, 'extra-images') ?? 0);
      const data = Array.from({ length: count }, (_, i) => ({
        ...(body.response_format === 'b64_json'
          ? { b64_json: b64Image(token(prompt, 'b64'), pixels) }
          : { url: imageFileUrl(req, prompt, `${Date.now()}-${i}`, pixels) }),
        ...(options.flavour === 'ark' ? { size: madeSize } : { revised_prompt: prompt }),
      }));
      for (let i = 0; i < count; i += 1) made.push(prompt);
      // Ark bills `usage.generated_images`; [billed:N] makes it N whatever was delivered (a group call billed in full, say).
      const billed = token(prompt, 'billed') === undefined ? count : Number(token(prompt, 'billed'));
      sendJson(res, 200, {
        model: body.model,
        created: Math.floor(Date.now() / 1000),
        data,
        usage: { generated_images: billed, output_tokens: 16384 * count, total_tokens: 16384 * count },
      });
    }),
  );
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    inputs,
    made,
    counters,
    unauthorizedAt,
    setApiKey(next: string) {
      apiKey = next;
    },
    setMode(next) {
      mode = next;
    },
    releaseHeld(tag?: string) {
      const releasing = held.filter((h) => tag === undefined || h.tag === tag);
      held = held.filter((h) => !releasing.includes(h));
      for (const h of releasing) h.release();
    },
    whenHeld(tag: string) {
      if (held.some((h) => h.tag === tag)) return Promise.resolve();
      return new Promise<void>((resolve) => heldWaiters.push({ tag, notify: resolve }));
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
