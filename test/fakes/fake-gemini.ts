import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type ReceivedImage, decodeDataUri } from './input-images';
import { AccountCounters, readBody, sendJson, token, answering } from './scenario';
import { solidPngB64 } from './solid-images';

/**
 * A local stand-in for the Gemini API's `POST /v1beta/models/{model}:generateContent` with image
 * output (ai.google.dev/api/generate-content, ai.google.dev/gemini-api/docs/image-generation,
 * ai.google.dev/gemini-api/docs/troubleshooting for the error statuses), kept apart from the
 * gateway's tables on purpose. Like the real one it authenticates `x-goog-api-key` (none: 403
 * PERMISSION_DENIED; a wrong one: 400 INVALID_ARGUMENT with reason API_KEY_INVALID), refuses unknown
 * fields ("Invalid JSON payload received. Unknown name"), a request over 20 MB, aspect ratios and
 * `imageSize` values the model does not list, more reference images than it takes, and bytes that are
 * no image; errors are `{error: {code, message, status, details}}`; an image is one `inlineData` part.
 * Prompt tokens: [block:REASON] promptFeedback.blockReason; [finish:REASON] a candidate ending so,
 * with no image; [error:STATUS:HTTP] that error; [busy] 429 RESOURCE_EXHAUSTED as Google answers an
 * exhausted per-minute quota: a QuotaFailure naming it, a Help link and a RetryInfo of 7 s ([busy:K]: the
 * first K calls of the prompt only); [quota-day] the same for an exhausted per-day quota (its quotaId
 * `…PerDay…`, ai.google.dev/gemini-api/docs/rate-limits: requests per day reset at midnight Pacific
 * time); [unavailable:K] the first K calls of the prompt answer 503 UNAVAILABLE; [textonly] a text
 * answer without an image; [hold] waits for releaseHeld().
 * The image is a real PNG of the documented output size for the aspect ratio and size tier asked (the
 * fake's own table). The 3.x models think: as Google documents for them (image-generation, "Thinking
 * process"), their answer first holds thought parts (`thought: true`), a text and up to two interim
 * images, smaller drafts here, then the final image, which carries the `thoughtSignature`.
 */
const RATIOS_2_5 = ['1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4', '9:16', '16:9', '21:9'];
const RATIOS_3_1 = [...RATIOS_2_5, '1:4', '4:1', '1:8', '8:1'];
interface ModelRules {
  ratios: string[];
  imageSizes: string[];
  maxImages: number;
  /** Whether it thinks (the 3.x image models): thought parts come before the image. */
  thinks: boolean;
}
const PRO: ModelRules = { ratios: RATIOS_2_5, imageSizes: ['1K', '2K', '4K'], maxImages: 14, thinks: true };
const FLASH_3_1: ModelRules = { ratios: RATIOS_3_1, imageSizes: ['1K', '2K', '4K'], maxImages: 14, thinks: true };
const MODELS: Record<string, ModelRules> = {
  'gemini-2.5-flash-image': { ratios: RATIOS_2_5, imageSizes: [], maxImages: 3, thinks: false },
  'gemini-3-pro-image': PRO,
  'gemini-3-pro-image-preview': PRO,
  'gemini-3.1-flash-image': FLASH_3_1,
  'gemini-3.1-flash-image-preview': FLASH_3_1,
};
const TOP_LEVEL = [
  'contents',
  'generationConfig',
  'generation_config',
  'safetySettings',
  'safety_settings',
  'systemInstruction',
  'system_instruction',
  'tools',
  'toolConfig',
  'cachedContent',
];
const GENERATION_CONFIG = [
  'responseModalities',
  'imageConfig',
  'temperature',
  'topP',
  'topK',
  'candidateCount',
  'maxOutputTokens',
  'stopSequences',
  'seed',
  'thinkingConfig',
];
/** Per aspect ratio, the outputs (ai.google.dev/gemini-api/docs/image-generation, one table per model): 2.5 Flash Image's one size, then 1K, 2K, 4K. */
const OUTPUTS_2_5: Record<string, [number, number]> = {
  '1:1': [1024, 1024],
  '2:3': [832, 1248],
  '3:2': [1248, 832],
  '3:4': [864, 1184],
  '4:3': [1184, 864],
  '4:5': [896, 1152],
  '5:4': [1152, 896],
  '9:16': [768, 1344],
  '16:9': [1344, 768],
  '21:9': [1536, 672],
};
const OUTPUTS_1K_3: Record<string, [number, number]> = {
  '1:1': [1024, 1024],
  '2:3': [848, 1264],
  '3:2': [1264, 848],
  '3:4': [896, 1200],
  '4:3': [1200, 896],
  '4:5': [928, 1152],
  '5:4': [1152, 928],
  '9:16': [768, 1376],
  '16:9': [1376, 768],
  '21:9': [1584, 672],
  '1:4': [512, 2048],
  '4:1': [2048, 512],
  '1:8': [384, 3072],
  '8:1': [3072, 384],
};
const TIER_SCALE: Record<string, number> = { '1K': 1, '2K': 2, '4K': 4 };

function outputSize(model: string, imageConfig: Record<string, unknown>): [number, number] {
  const ratio = String(imageConfig.aspectRatio ?? '1:1');
  if (model.startsWith('gemini-2.5')) return OUTPUTS_2_5[ratio] ?? [1024, 1024];
  const [w, h] = OUTPUTS_1K_3[ratio] ?? [1024, 1024];
  const scale = TIER_SCALE[String(imageConfig.imageSize ?? '1K')] ?? 1;
  return [w * scale, h * scale];
}

const quotaExhausted = (quotaId: string, metric: string, model: string, retryDelay: string) => [
  {
    '@type': 'type.googleapis.com/google.rpc.QuotaFailure',
    violations: [{ quotaMetric: `generativelanguage.googleapis.com/${metric}`, quotaId, quotaDimensions: { location: 'global', model }, quotaValue: '10' }],
  },
  {
    '@type': 'type.googleapis.com/google.rpc.Help',
    links: [{ description: 'Learn more about Gemini API quotas', url: 'https://ai.google.dev/gemini-api/docs/rate-limits' }],
  },
  { '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay },
];

/** The Gemini API's inline request limit. */
const MAX_REQUEST_BYTES = 20 * 1024 * 1024;

export interface FakeGeminiCall {
  model: string;
  body: Record<string, unknown>;
  /** The `x-goog-api-key` it carried. */
  apiKey: string | undefined;
  /** The reference images of the call, as the API decoded them. */
  images: Array<ReceivedImage | undefined>;
}

export interface FakeGemini {
  /** The API's root, as GEMINI_BASE_URL / a channel's base_url take it (the client adds `/v1beta`). */
  url: string;
  calls: FakeGeminiCall[];
  /** Every generateContent request and the HTTP status it was answered with, refused ones included. */
  answered: Array<{ model: string; status: number }>;
  /** One prompt per image answered: what the account is billed for. */
  made: string[];
  counters: AccountCounters;
  setApiKey(apiKey: string): void;
  /** Every call answers this error (an account whose region is down) until cleared with undefined. */
  setOutage(outage: { status: string; code: number } | undefined): void;
  releaseHeld(): void;
  close(): Promise<void>;
}

const googleError = (res: http.ServerResponse, code: number, status: string, message: string, details: unknown[] = []) =>
  sendJson(res, code, { error: { code, message, status, ...(details.length > 0 ? { details } : {}) } });

export async function startFakeGemini(options: { apiKey: string }, port = 0): Promise<FakeGemini> {
  const calls: FakeGeminiCall[] = [];
  const answered: Array<{ model: string; status: number }> = [];
  const made: string[] = [];
  const counters = new AccountCounters();
  const callsOfPrompt = new Map<string, number>();
  let apiKey = options.apiKey;
  let outage: { status: string; code: number } | undefined;
  let held: Array<() => void> = [];

  const server = http.createServer(
    answering(async (req, res) => {
      const raw = await readBody(req);
      const route = /^\/v1beta\/models\/([^/:]+):generateContent(?:\?.*)?$/.exec(req.url ?? '');
      if (req.method !== 'POST' || !route) return googleError(res, 404, 'NOT_FOUND', `Requested entity was not found: ${req.method} ${req.url}`);
      res.once('finish', () => answered.push({ model: decodeURIComponent(route[1]!), status: res.statusCode }));
      const sentKey = req.headers['x-goog-api-key'] as string | undefined;
      if (sentKey === undefined) {
        return googleError(
          res,
          403,
          'PERMISSION_DENIED',
          "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
        );
      }
      if (sentKey !== apiKey) {
        return googleError(res, 400, 'INVALID_ARGUMENT', 'API key not valid. Please pass a valid API key.', [
          {
            '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
            reason: 'API_KEY_INVALID',
            domain: 'googleapis.com',
            metadata: { service: 'generativelanguage.googleapis.com' },
          },
        ]);
      }
      const model = decodeURIComponent(route[1]!);
      const rules = MODELS[model];
      if (!rules)
        return googleError(
          res,
          404,
          'NOT_FOUND',
          `models/${model} is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.`,
        );
      if (Buffer.byteLength(raw) > MAX_REQUEST_BYTES)
        return googleError(res, 400, 'INVALID_ARGUMENT', `Request payload size exceeds the limit: ${MAX_REQUEST_BYTES} bytes.`);
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(raw) as Record<string, unknown>;
      } catch {
        return googleError(res, 400, 'INVALID_ARGUMENT', 'Invalid JSON payload received.');
      }
      const finished = counters.start();
      res.once('close', finished);
      const unknown = Object.keys(body).find((field) => !TOP_LEVEL.includes(field));
      if (unknown) return googleError(res, 400, 'INVALID_ARGUMENT', `Invalid JSON payload received. Unknown name "${unknown}": Cannot find field.`);
      const config = (body.generationConfig ?? {}) as Record<string, unknown>;
      const unknownConfig = Object.keys(config).find((field) => !GENERATION_CONFIG.includes(field));
      if (unknownConfig)
        return googleError(
          res,
          400,
          'INVALID_ARGUMENT',
          `Invalid JSON payload received. Unknown name "${unknownConfig}" at 'generation_config': Cannot find field.`,
        );
      const imageConfig = (config.imageConfig ?? {}) as Record<string, unknown>;
      if (imageConfig.aspectRatio !== undefined && !rules.ratios.includes(String(imageConfig.aspectRatio)))
        return googleError(res, 400, 'INVALID_ARGUMENT', 'Unsupported aspect ratio.');
      if (imageConfig.imageSize !== undefined && !rules.imageSizes.includes(String(imageConfig.imageSize)))
        return googleError(res, 400, 'INVALID_ARGUMENT', `imageSize is not supported for ${model}.`);
      const contents = (body.contents ?? []) as Array<{ role?: string; parts?: Array<Record<string, unknown>> }>;
      const parts = contents.flatMap((content) => content.parts ?? []);
      const prompt = parts.map((part) => (typeof part.text === 'string' ? part.text : '')).join(' ');
      const images = parts
        .map((part) => (part.inline_data ?? part.inlineData) as { mime_type?: string; mimeType?: string; data?: string } | undefined)
        .filter((inline) => inline !== undefined)
        .map((inline) => decodeDataUri(`data:${inline.mime_type ?? inline.mimeType};base64,${inline.data ?? ''}`));
      calls.push({ model, body, apiKey: sentKey, images });
      const nth = (callsOfPrompt.get(prompt) ?? 0) + 1;
      callsOfPrompt.set(prompt, nth);
      if (images.length > rules.maxImages) return googleError(res, 400, 'INVALID_ARGUMENT', `Too many images: ${model} takes at most ${rules.maxImages}.`);
      if (images.some((image) => !image?.format))
        return googleError(
          res,
          400,
          'INVALID_ARGUMENT',
          'Unable to process input image. Please retry or report in https://developers.generativeai.google/guide/troubleshooting',
        );
      if (outage) return googleError(res, outage.code, outage.status, `fake outage: ${outage.status}`);
      if (token(prompt, 'hold') !== undefined) await new Promise<void>((resolve) => held.push(resolve));
      const failure = token(prompt, 'error');
      if (failure) {
        const [status, code] = failure.split(':');
        return googleError(res, Number(code ?? 500), status ?? 'INTERNAL', `fake ${status}`);
      }
      const unavailable = token(prompt, 'unavailable');
      if (unavailable !== undefined && nth <= Number(unavailable || Infinity))
        return googleError(res, 503, 'UNAVAILABLE', 'The model is overloaded. Please try again later.');
      const busy = token(prompt, 'busy');
      if (busy !== undefined && nth <= Number(busy || Infinity)) {
        return googleError(
          res,
          429,
          'RESOURCE_EXHAUSTED',
          'You exceeded your current quota, please check your plan and billing details. Please retry in 7s.',
          quotaExhausted('GenerateRequestsPerMinutePerProjectPerModel', 'generate_content_paid_tier_requests', model, '7s'),
        );
      }
      if (token(prompt, 'quota-day') !== undefined) {
        return googleError(
          res,
          429,
          'RESOURCE_EXHAUSTED',
          'You exceeded your current quota, please check your plan and billing details. Please retry in 41.3s.',
          quotaExhausted('GenerateRequestsPerDayPerProjectPerModel-FreeTier', 'generate_content_free_tier_requests', model, '41s'),
        );
      }
      const block = token(prompt, 'block');
      if (block) return sendJson(res, 200, { promptFeedback: { blockReason: block }, usageMetadata: { promptTokenCount: 8, totalTokenCount: 8 } });
      const finish = token(prompt, 'finish');
      if (finish) return sendJson(res, 200, { candidates: [{ content: { role: 'model', parts: [] }, finishReason: finish, index: 0 }] });
      const textOnly = token(prompt, 'textonly') !== undefined;
      const [width, height] = outputSize(model, imageConfig);
      const responseParts: Array<Record<string, unknown>> = [];
      if (rules.thinks) {
        // Thoughts: a text, then two interim drafts (smaller than the final image here, so a client that takes them shows).
        responseParts.push({ text: '**Composing the scene**\nTrying the layout first.', thought: true });
        for (const draft of [2, 3])
          responseParts.push({ inlineData: { mimeType: 'image/png', data: solidPngB64(Math.ceil(width / draft), Math.ceil(height / draft)) }, thought: true });
      }
      responseParts.push({ text: 'Here is the image.' });
      if (!textOnly) {
        responseParts.push({
          inlineData: { mimeType: 'image/png', data: solidPngB64(width, height) },
          ...(rules.thinks ? { thoughtSignature: 'c2lnbmF0dXJl' } : {}),
        });
        made.push(prompt);
      }
      sendJson(res, 200, {
        candidates: [{ content: { role: 'model', parts: responseParts }, finishReason: 'STOP', index: 0 }],
        usageMetadata: { promptTokenCount: 8, candidatesTokenCount: textOnly ? 5 : 1290, totalTokenCount: textOnly ? 13 : 1298 },
        modelVersion: model,
      });
    }),
  );
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    answered,
    made,
    counters,
    setApiKey(next) {
      apiKey = next;
    },
    setOutage(next) {
      outage = next;
    },
    releaseHeld() {
      const releasing = held;
      held = [];
      for (const release of releasing) release();
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
