import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type ReceivedImage, decodeDataUri } from './input-images';
import { AccountCounters, TINY_PNG_B64, readBody, sendJson, token } from './scenario';

/**
 * A local stand-in for the Gemini API's `POST /v1beta/models/{model}:generateContent` with image
 * output (ai.google.dev/api/generate-content, ai.google.dev/gemini-api/docs/image-generation),
 * kept apart from the gateway's tables on purpose. Like the real one it authenticates `x-goog-api-key`
 * (a wrong key: 400 INVALID_ARGUMENT with reason API_KEY_INVALID), refuses unknown fields ("Invalid
 * JSON payload received. Unknown name"), takes the documented aspect ratios only, and `imageSize` only
 * on the 3.x models; errors are `{error: {code, message, status, details}}`.
 * Prompt tokens: [block:REASON] promptFeedback.blockReason; [finish:REASON] a candidate ending so,
 * with no image; [error:STATUS:HTTP] that error; [busy] 429 RESOURCE_EXHAUSTED with a RetryInfo of 7 s;
 * [textonly] a text answer without an image; [hold] waits for releaseHeld().
 */
const RATIOS = ['1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4', '9:16', '16:9', '21:9'];
const MODELS: Record<string, { imageSizes: string[]; maxImages: number }> = {
  'gemini-2.5-flash-image': { imageSizes: [], maxImages: 3 },
  'gemini-3-pro-image-preview': { imageSizes: ['1K', '2K', '4K'], maxImages: 14 },
};
const TOP_LEVEL = ['contents', 'generationConfig', 'generation_config', 'safetySettings', 'safety_settings', 'systemInstruction', 'system_instruction', 'tools', 'toolConfig', 'cachedContent'];
const GENERATION_CONFIG = ['responseModalities', 'imageConfig', 'temperature', 'topP', 'topK', 'candidateCount', 'maxOutputTokens', 'stopSequences', 'seed'];

export interface FakeGeminiCall {
  model: string;
  body: Record<string, unknown>;
  /** The reference images of the call, as the API decoded them. */
  images: Array<ReceivedImage | undefined>;
}

export interface FakeGemini {
  /** The base URL up to the version, as GEMINI_BASE_URL / a channel's base_url take it. */
  url: string;
  calls: FakeGeminiCall[];
  /** One entry per image answered: what the account is billed for. */
  made: string[];
  counters: AccountCounters;
  setApiKey(apiKey: string): void;
  releaseHeld(): void;
  close(): Promise<void>;
}

const googleError = (res: http.ServerResponse, code: number, status: string, message: string, details: unknown[] = []) =>
  sendJson(res, code, { error: { code, message, status, ...(details.length > 0 ? { details } : {}) } });

export async function startFakeGemini(options: { apiKey: string }, port = 0): Promise<FakeGemini> {
  const calls: FakeGeminiCall[] = [];
  const made: string[] = [];
  const counters = new AccountCounters();
  let apiKey = options.apiKey;
  let held: Array<() => void> = [];

  const server = http.createServer(async (req, res) => {
    const raw = await readBody(req);
    const route = /^\/v1beta\/models\/([^/:]+):generateContent(?:\?.*)?$/.exec(req.url ?? '');
    if (req.method !== 'POST' || !route) return googleError(res, 404, 'NOT_FOUND', `Requested entity was not found: ${req.method} ${req.url}`);
    if (req.headers['x-goog-api-key'] !== apiKey) {
      return googleError(res, 400, 'INVALID_ARGUMENT', 'API key not valid. Please pass a valid API key.', [
        { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID', domain: 'googleapis.com' },
      ]);
    }
    const model = decodeURIComponent(route[1]!);
    const spec = MODELS[model];
    if (!spec) return googleError(res, 404, 'NOT_FOUND', `models/${model} is not found for API version v1beta, or is not supported for generateContent.`);
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
    if (unknownConfig) return googleError(res, 400, 'INVALID_ARGUMENT', `Invalid JSON payload received. Unknown name "${unknownConfig}" at 'generation_config': Cannot find field.`);
    const imageConfig = (config.imageConfig ?? {}) as Record<string, unknown>;
    if (imageConfig.aspectRatio !== undefined && !RATIOS.includes(String(imageConfig.aspectRatio))) return googleError(res, 400, 'INVALID_ARGUMENT', 'Unsupported aspect ratio.');
    if (imageConfig.imageSize !== undefined && !spec.imageSizes.includes(String(imageConfig.imageSize))) return googleError(res, 400, 'INVALID_ARGUMENT', `imageSize is not supported for ${model}.`);
    const contents = (body.contents ?? []) as Array<{ role?: string; parts?: Array<Record<string, unknown>> }>;
    const parts = contents.flatMap((content) => content.parts ?? []);
    const prompt = parts.map((part) => (typeof part.text === 'string' ? part.text : '')).join(' ');
    const images = parts
      .map((part) => (part.inline_data ?? part.inlineData) as { mime_type?: string; mimeType?: string; data?: string } | undefined)
      .filter((inline) => inline !== undefined)
      .map((inline) => decodeDataUri(`data:${inline.mime_type ?? inline.mimeType};base64,${inline.data ?? ''}`));
    calls.push({ model, body, images });
    if (images.length > spec.maxImages) return googleError(res, 400, 'INVALID_ARGUMENT', `Too many images: ${model} takes at most ${spec.maxImages}.`);
    if (images.some((image) => !image?.format)) return googleError(res, 400, 'INVALID_ARGUMENT', 'Unable to process input image.');
    if (token(prompt, 'hold') !== undefined) await new Promise<void>((resolve) => held.push(resolve));
    const failure = token(prompt, 'error');
    if (failure) {
      const [status, code] = failure.split(':');
      return googleError(res, Number(code ?? 500), status ?? 'INTERNAL', `fake ${status}`);
    }
    if (token(prompt, 'busy') !== undefined) {
      return googleError(res, 429, 'RESOURCE_EXHAUSTED', 'Resource has been exhausted (e.g. check quota).', [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '7s' }]);
    }
    const block = token(prompt, 'block');
    if (block) return sendJson(res, 200, { promptFeedback: { blockReason: block }, usageMetadata: { promptTokenCount: 8, totalTokenCount: 8 } });
    const finish = token(prompt, 'finish');
    if (finish) return sendJson(res, 200, { candidates: [{ content: { role: 'model', parts: [] }, finishReason: finish, index: 0 }] });
    const textOnly = token(prompt, 'textonly') !== undefined;
    const responseParts: Array<Record<string, unknown>> = [{ text: 'Here is the image.' }];
    if (!textOnly) {
      responseParts.push({ inlineData: { mimeType: 'image/png', data: TINY_PNG_B64 } });
      made.push(prompt);
    }
    sendJson(res, 200, {
      candidates: [{ content: { role: 'model', parts: responseParts }, finishReason: 'STOP', index: 0 }],
      usageMetadata: { promptTokenCount: 8, candidatesTokenCount: textOnly ? 5 : 1290, totalTokenCount: textOnly ? 13 : 1298 },
      modelVersion: model,
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1beta`,
    calls,
    made,
    counters,
    setApiKey(next) {
      apiKey = next;
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
