import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { sniff } from './input-images';
import { imageFileUrl, sendJson, serveImageFile, sizeOf, token, answering } from './scenario';
import { solidJpeg, solidPngB64 } from './solid-images';

/**
 * A local stand-in for OpenAI's Images API (`POST /v1/images/generations`, JSON, and `POST /v1/images/edits`,
 * multipart/form-data), refusing what the real one refuses. Its rules are its own, written from the official
 * `openai` Node SDK 6.49.0 (node_modules/openai/resources/images.d.ts) and kept apart from the gateway's table
 * (src/providers/openai/models.ts) on purpose, so a drift shows:
 * - no key → 401 `invalid_request_error` without a code; a wrong key → 401 `invalid_api_key`;
 * - a field the model does not take (`response_format` or `seed` on a GPT image model, `background` on
 *   dall-e-3, `moderation` on an edit, …) → 400 `unknown_parameter` naming it in `param`;
 * - a value outside the model's set (sizes, `quality`, `n` above 1 on dall-e-3, …) → 400 `invalid_value`;
 * - edits: the body parsed as real multipart; images from `image` or `image[]` file parts (png, webp, jpeg;
 *   < 50 MB; at most 16); `mask` a PNG with alpha, the first image's size.
 * Failures per prompt token: [fail:CODE] or [fail:CODE:STATUS], CODE one of FAILURES (rate_limit_exceeded
 * answers with Retry-After: 7). Every error body is `{error:{message,type,param,code}}`. [hold]: the call
 * is answered only after releaseHeld() (a call whose client closes the connection first is listed in `abandoned` at once).
 * [extra-images:K]: K images more than `n`. Images are real ones of the size made (PNG, JPEG for `output_format: jpeg`).
 */

/** Each model's documented sizes, fields and values (SDK `ImageGenerateParamsBase` / `ImageEditParamsBase`). */
interface FakeModel {
  sizes: string[];
  generations: Record<string, readonly string[] | 'any'>;
  edits?: Record<string, readonly string[] | 'any'>;
  maxN: number;
}
const GPT_SIZES = ['1024x1024', '1536x1024', '1024x1536', 'auto'];
const GPT_COMMON = {
  quality: ['low', 'medium', 'high', 'auto'],
  background: ['transparent', 'opaque', 'auto'],
  output_format: ['png', 'jpeg', 'webp'],
  output_compression: 'any',
  user: 'any',
  stream: 'any',
  partial_images: 'any',
} as const;
const gptModel = (inputFidelity: boolean): FakeModel => ({
  sizes: GPT_SIZES,
  generations: { ...GPT_COMMON, moderation: ['low', 'auto'] },
  edits: { ...GPT_COMMON, ...(inputFidelity ? { input_fidelity: ['high', 'low'] } : {}) },
  maxN: 10,
});
const MODELS: Record<string, FakeModel> = {
  'gpt-image-1': gptModel(true),
  'gpt-image-1.5': gptModel(true),
  'gpt-image-1-mini': gptModel(false),
  'dall-e-3': {
    sizes: ['1024x1024', '1792x1024', '1024x1792'],
    generations: { quality: ['standard', 'hd'], style: ['vivid', 'natural'], response_format: ['url', 'b64_json'], user: 'any' },
    maxN: 1,
  },
};

/** Configurable failures: status, type and message as OpenAI answers them. */
const FAILURES: Record<string, { status: number; type: string; message: string; param?: string }> = {
  moderation_blocked: { status: 400, type: 'image_generation_user_error', message: 'Your request was rejected by the safety system.' },
  content_policy_violation: { status: 400, type: 'invalid_request_error', message: 'Your request was rejected as a result of our safety system.' },
  insufficient_quota: { status: 429, type: 'insufficient_quota', message: 'You exceeded your current quota, please check your plan and billing details.' },
  billing_hard_limit_reached: { status: 400, type: 'invalid_request_error', message: 'Billing hard limit has been reached.' },
  rate_limit_exceeded: {
    status: 429,
    type: 'requests',
    message: 'Rate limit reached for gpt-image-1 on requests per minute (RPM): Limit 5, Used 5, Requested 1.',
  },
  model_not_found: { status: 404, type: 'invalid_request_error', message: 'The model `gpt-image-1` does not exist or you do not have access to it.' },
  invalid_value: { status: 400, type: 'invalid_request_error', message: 'Invalid prompt: the prompt is not valid for this model.', param: 'prompt' },
  server_error: { status: 500, type: 'server_error', message: 'The server had an error while processing your request.' },
  gateway_timeout: { status: 504, type: 'server_error', message: 'Gateway timeout.' },
};

const MAX_INPUT_BYTES = 50 * 1000 * 1000;
const MAX_MASK_BYTES = 4 * 1000 * 1000;

export interface FakeOpenAIFile {
  field: string;
  filename: string;
  contentType: string;
  bytes: Buffer;
  format?: string;
  width?: number;
  height?: number;
}

export interface FakeOpenAIRequest {
  endpoint: 'generations' | 'edits';
  contentType: string;
  /** The JSON body, or the multipart text fields (as the strings they are on the wire). */
  fields: Record<string, unknown>;
  /** Multipart file parts, in order. */
  files: FakeOpenAIFile[];
}

export interface FakeOpenAIImages {
  url: string;
  /** Authenticated calls, as received (refused ones too). */
  requests: FakeOpenAIRequest[];
  /** Images answered, one entry (the prompt) per image: what OpenAI bills. */
  made: string[];
  /** Prompts of held calls whose client closed the connection before the answer. */
  abandoned: string[];
  setApiKey(apiKey: string): void;
  /** Resolves once a call with [hold] is waiting here (accepted, not answered). */
  whenHeld(): Promise<void>;
  /** Answers every call held so far. */
  releaseHeld(): void;
  close(): Promise<void>;
}

function readRaw(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function openaiError(
  res: http.ServerResponse,
  status: number,
  error: { message: string; type: string; param?: string | null; code?: string | null },
  headers: Record<string, string> = {},
): void {
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  sendJson(res, status, { error: { message: error.message, type: error.type, param: error.param ?? null, code: error.code ?? null } });
}

/** Whether a PNG carries alpha: colour type 4 or 6, or a tRNS chunk. */
function pngHasAlpha(bytes: Buffer): boolean {
  const colourType = bytes[25];
  return colourType === 4 || colourType === 6 || bytes.includes(Buffer.from('tRNS', 'latin1'));
}

/** The multipart body parsed by undici's own parser (Node's Request), independent of the gateway's encoder. */
async function parseMultipart(raw: Buffer, contentType: string): Promise<{ fields: Record<string, string>; files: FakeOpenAIFile[] }> {
  const form = await new Request('http://fake.invalid/', { method: 'POST', headers: { 'content-type': contentType }, body: raw }).formData();
  const fields: Record<string, string> = {};
  const files: FakeOpenAIFile[] = [];
  for (const [field, value] of form.entries()) {
    if (typeof value === 'string') fields[field] = value;
    else {
      const bytes = Buffer.from(await value.arrayBuffer());
      files.push({ field, filename: value.name, contentType: value.type, bytes, ...sniff(bytes) });
    }
  }
  return { fields, files };
}

/** Why OpenAI would refuse these fields for the model on this endpoint, or undefined. */
function fieldRefusal(
  endpoint: 'generations' | 'edits',
  fields: Record<string, unknown>,
  multipart: boolean,
): { message: string; param: string; code: string } | undefined {
  const model = String(fields.model ?? '');
  const spec = MODELS[model];
  if (!spec) return { message: `Invalid value: '${model}'. The model does not exist or you do not have access to it.`, param: 'model', code: 'invalid_value' };
  const rules = endpoint === 'edits' ? spec.edits : spec.generations;
  if (!rules) return { message: `Invalid value: '${model}'. Value must be one of the models /images/edits supports.`, param: 'model', code: 'invalid_value' };
  const base = ['model', 'prompt', 'n', 'size'];
  for (const [field, value] of Object.entries(fields)) {
    if (base.includes(field)) continue;
    const rule = rules[field];
    if (!rule) return { message: `Unknown parameter: '${field}'.`, param: field, code: 'unknown_parameter' };
    if (rule !== 'any' && !rule.includes(String(value)))
      return {
        message: `Invalid value: '${String(value)}'. Supported values are: ${rule.map((v) => `'${v}'`).join(', ')}.`,
        param: field,
        code: 'invalid_value',
      };
  }
  if (typeof fields.prompt !== 'string' || fields.prompt === '')
    return { message: "Missing required parameter: 'prompt'.", param: 'prompt', code: 'missing_required_parameter' };
  const size = fields.size === undefined ? undefined : String(fields.size);
  if (size !== undefined && !spec.sizes.includes(size))
    return { message: `Invalid value: '${size}'. Supported values are: ${spec.sizes.map((v) => `'${v}'`).join(', ')}.`, param: 'size', code: 'invalid_value' };
  // Multipart fields are text: `n` is its digits there, a number in JSON.
  const n = fields.n === undefined ? 1 : multipart ? Number(fields.n) : fields.n;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > spec.maxN)
    return { message: `Invalid value: ${String(fields.n)}. 'n' must be between 1 and ${spec.maxN} for ${model}.`, param: 'n', code: 'invalid_value' };
  if (fields.background === 'transparent' && fields.output_format === 'jpeg')
    return { message: 'Transparent background requires output_format png or webp.', param: 'background', code: 'invalid_value' };
  return undefined;
}

/** Why OpenAI would refuse the edit's files, or undefined. */
function fileRefusal(files: FakeOpenAIFile[]): { message: string; param: string } | undefined {
  const unknown = files.find((f) => !['image', 'image[]', 'mask'].includes(f.field));
  if (unknown) return { message: `Unknown parameter: '${unknown.field}'.`, param: unknown.field };
  const images = files.filter((f) => f.field === 'image' || f.field === 'image[]');
  const masks = files.filter((f) => f.field === 'mask');
  if (images.length === 0) return { message: "Missing required parameter: 'image'.", param: 'image' };
  if (images.length > 16) return { message: `Invalid 'image': up to 16 images may be provided (got ${images.length}).`, param: 'image' };
  for (const [i, image] of images.entries()) {
    if (!image.format || !['png', 'webp', 'jpeg'].includes(image.format))
      return { message: `Invalid image file or mode for image ${i + 1}, please check your image file.`, param: 'image' };
    if (image.bytes.length >= MAX_INPUT_BYTES) return { message: `Image ${i + 1} is larger than 50MB.`, param: 'image' };
  }
  if (masks.length > 1) return { message: 'Only one mask may be provided.', param: 'mask' };
  const mask = masks[0];
  if (!mask) return undefined;
  const first = images[0]!;
  if (mask.format !== 'png') return { message: 'Invalid mask image format - mask must be a PNG.', param: 'mask' };
  if (mask.bytes.length >= MAX_MASK_BYTES) return { message: 'Mask image must be less than 4MB.', param: 'mask' };
  if (!pngHasAlpha(mask.bytes)) return { message: 'Invalid mask image format - mask image missing alpha channel.', param: 'mask' };
  if (mask.width !== first.width || mask.height !== first.height)
    return { message: 'Invalid mask: the mask and image must have the same dimensions.', param: 'mask' };
  return undefined;
}

export async function startFakeOpenAIImages(options: { apiKey: string }, port = 0): Promise<FakeOpenAIImages> {
  let apiKey = options.apiKey;
  const requests: FakeOpenAIRequest[] = [];
  const made: string[] = [];
  const abandoned: string[] = [];
  let held: Array<() => void> = [];
  let heldWaiters: Array<() => void> = [];

  const server = http.createServer(
    answering(async (req, res) => {
      const raw = await readRaw(req);
      if (serveImageFile(req, res)) return;
      const endpoint =
        req.method === 'POST' && req.url?.endsWith('/images/generations')
          ? 'generations'
          : req.method === 'POST' && req.url?.endsWith('/images/edits')
            ? 'edits'
            : undefined;
      if (!endpoint) return openaiError(res, 404, { message: `Invalid URL (${req.method} ${req.url})`, type: 'invalid_request_error' });
      const authorization = req.headers.authorization;
      if (!authorization) {
        return openaiError(res, 401, {
          message:
            "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
          type: 'invalid_request_error',
        });
      }
      if (authorization !== `Bearer ${apiKey}`) {
        return openaiError(res, 401, {
          message: `Incorrect API key provided: ${authorization.slice(7, 10)}***. You can find your API key at https://platform.openai.com/account/api-keys.`,
          type: 'invalid_request_error',
          code: 'invalid_api_key',
        });
      }
      const contentType = String(req.headers['content-type'] ?? '');
      let fields: Record<string, unknown>;
      let files: FakeOpenAIFile[] = [];
      if (endpoint === 'edits') {
        if (!contentType.startsWith('multipart/form-data'))
          return openaiError(res, 400, { message: 'Invalid Content-Type header, expected multipart/form-data.', type: 'invalid_request_error' });
        try {
          ({ fields, files } = await parseMultipart(raw, contentType));
        } catch {
          return openaiError(res, 400, { message: 'Could not parse multipart form.', type: 'invalid_request_error' });
        }
      } else {
        if (!contentType.startsWith('application/json'))
          return openaiError(res, 400, { message: 'Invalid Content-Type header, expected application/json.', type: 'invalid_request_error' });
        try {
          fields = JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
        } catch {
          return openaiError(res, 400, { message: 'We could not parse the JSON body of your request.', type: 'invalid_request_error' });
        }
      }
      requests.push({ endpoint, contentType, fields, files });
      const refused = fieldRefusal(endpoint, fields, endpoint === 'edits');
      if (refused) return openaiError(res, 400, { ...refused, type: 'invalid_request_error' });
      if (endpoint === 'edits') {
        const badFile = fileRefusal(files);
        if (badFile) return openaiError(res, 400, { ...badFile, type: 'invalid_request_error', code: 'invalid_value' });
      }
      const prompt = String(fields.prompt);
      if (token(prompt, 'hold') !== undefined) {
        let gone = false;
        res.once('close', () => {
          gone = !res.writableEnded;
          if (gone) abandoned.push(prompt);
        });
        await new Promise<void>((resolve) => {
          held.push(resolve);
          for (const notify of heldWaiters) notify();
          heldWaiters = [];
        });
        if (gone) return;
      }
      const failure = token(prompt, 'fail');
      if (failure) {
        const [code, status] = failure.split(':');
        const known = FAILURES[code!];
        if (!known) return openaiError(res, 500, { message: `fake: unknown failure ${code}`, type: 'server_error' });
        return openaiError(
          res,
          Number(status ?? known.status),
          { message: known.message, type: known.type, param: known.param, code: code === 'server_error' || code === 'gateway_timeout' ? null : code },
          code === 'rate_limit_exceeded' ? { 'Retry-After': '7' } : {},
        );
      }
      const model = String(fields.model);
      // [extra-images:K]: K images more than `n` asked for (a misbehaving upstream or proxy).
      const count = (fields.n === undefined ? 1 : Number(fields.n)) + Number(token(prompt, 'extra-images') ?? 0);
      const size = fields.size === undefined || fields.size === 'auto' ? '1024x1024' : String(fields.size);
      const pixels = sizeOf(size) ?? { width: 1024, height: 1024 };
      // The images are real ones of the size made, in the format asked (PNG by default; WebP is answered as PNG here).
      const b64 = fields.output_format === 'jpeg' ? solidJpeg(pixels.width, pixels.height).toString('base64') : solidPngB64(pixels.width, pixels.height);
      for (let i = 0; i < count; i += 1) made.push(prompt);
      if (model === 'dall-e-3') {
        const data = Array.from({ length: count }, (_, i) => ({
          ...(fields.response_format === 'b64_json' ? { b64_json: b64 } : { url: imageFileUrl(req, prompt, `${Date.now()}-${i}`, pixels) }),
          revised_prompt: prompt,
        }));
        return sendJson(res, 200, { created: Math.floor(Date.now() / 1000), data });
      }
      // Token counts as OpenAI reports them: deterministic here, so a test can check they reach the gateway.
      const textTokens = prompt.split(/\s+/).length;
      const imageTokens = 323 * files.filter((f) => f.field !== 'mask').length;
      const outputTokens = 272 * count;
      sendJson(res, 200, {
        created: Math.floor(Date.now() / 1000),
        background: fields.background === 'transparent' ? 'transparent' : 'opaque',
        data: Array.from({ length: count }, () => ({ b64_json: b64 })),
        output_format: String(fields.output_format ?? 'png'),
        quality: fields.quality === undefined || fields.quality === 'auto' ? 'medium' : String(fields.quality),
        size,
        usage: {
          input_tokens: textTokens + imageTokens,
          input_tokens_details: { image_tokens: imageTokens, text_tokens: textTokens },
          output_tokens: outputTokens,
          output_tokens_details: { image_tokens: outputTokens, text_tokens: 0 },
          total_tokens: textTokens + imageTokens + outputTokens,
        },
      });
    }),
  );
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    made,
    abandoned,
    setApiKey(next: string) {
      apiKey = next;
    },
    whenHeld: () => (held.length > 0 ? Promise.resolve() : new Promise<void>((resolve) => heldWaiters.push(resolve))),
    releaseHeld() {
      const waiting = held;
      held = [];
      for (const release of waiting) release();
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
