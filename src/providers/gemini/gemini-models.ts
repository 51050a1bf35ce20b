import type { InputImageLimits } from '../upstream-models';

/**
 * Gemini's image models take no width and height: an aspect ratio (`imageConfig.aspectRatio`) and, on
 * the 3.x models, a size tier (`imageConfig.imageSize`: 1K, 2K, 4K), each pair making one documented
 * output size. The gateway's `WxH` sizes are those outputs, so a client asks for exactly what it gets.
 * Source: ai.google.dev/gemini-api/docs/image-generation, the "aspect ratios and resolutions" tables
 * (Gemini 2.5 Flash Image: 1K only; Gemini 3 Pro Image: 1K, 2K, 4K).
 */
export interface GeminiOutputSize {
  size: string;
  aspectRatio: string;
  /** Absent for models that take no `imageSize` (2.5 Flash Image). */
  imageSize?: '1K' | '2K' | '4K';
}

const FLASH_2_5: readonly GeminiOutputSize[] = [
  ['1:1', '1024x1024'],
  ['2:3', '832x1248'],
  ['3:2', '1248x832'],
  ['3:4', '864x1184'],
  ['4:3', '1184x864'],
  ['4:5', '896x1152'],
  ['5:4', '1152x896'],
  ['9:16', '768x1344'],
  ['16:9', '1344x768'],
  ['21:9', '1536x672'],
].map(([aspectRatio, size]) => ({ aspectRatio: aspectRatio!, size: size! }));

/** Gemini 3 Pro Image: per aspect ratio, the 1K, 2K and 4K outputs. */
const PRO_3: readonly GeminiOutputSize[] = (
  [
    ['1:1', '1024x1024', '2048x2048', '4096x4096'],
    ['2:3', '848x1264', '1696x2528', '3392x5056'],
    ['3:2', '1264x848', '2528x1696', '5056x3392'],
    ['3:4', '896x1200', '1792x2400', '3584x4800'],
    ['4:3', '1200x896', '2400x1792', '4800x3584'],
    ['4:5', '928x1152', '1856x2304', '3712x4608'],
    ['5:4', '1152x928', '2304x1856', '4608x3712'],
    ['9:16', '768x1376', '1536x2752', '3072x5504'],
    ['16:9', '1376x768', '2752x1536', '5504x3072'],
    ['21:9', '1584x672', '3168x1344', '6336x2688'],
  ] as const
).flatMap(([aspectRatio, k1, k2, k4]) => [
  { aspectRatio, size: k1, imageSize: '1K' as const },
  { aspectRatio, size: k2, imageSize: '2K' as const },
  { aspectRatio, size: k4, imageSize: '4K' as const },
]);

const MB = 1_000_000;

/**
 * Reference images as `inline_data` parts: PNG, JPEG or WebP (the formats both models list), each
 * well under the 20 MB a whole inline request may carry; 2.5 Flash works best with up to 3, 3 Pro
 * takes up to 14. No mask: an edit is described in the prompt.
 */
const inputs = (maxImages: number): InputImageLimits => ({ max_images: maxImages, formats: ['png', 'jpeg', 'webp'], max_bytes: 7 * MB, mask: false, delivery: 'inline' });

export interface GeminiModel {
  /** The model id in the URL (`models/{id}:generateContent`); a trailing `*` matches later revisions. */
  match: string;
  sizes: readonly GeminiOutputSize[];
  inputs: InputImageLimits;
}

export const GEMINI_MODELS: readonly GeminiModel[] = [
  { match: 'gemini-2.5-flash-image', sizes: FLASH_2_5, inputs: inputs(3) },
  { match: 'gemini-3-pro-image-preview', sizes: PRO_3, inputs: inputs(14) },
];

export function geminiModel(upstreamModel: string): GeminiModel | undefined {
  return GEMINI_MODELS.find((model) => (model.match.endsWith('*') ? upstreamModel.startsWith(model.match.slice(0, -1)) : upstreamModel === model.match));
}

/** The `imageConfig` that makes `width`×`height` on `upstreamModel`, or undefined when it makes no such size. */
export function imageConfigFor(upstreamModel: string, width: number, height: number): { aspectRatio: string; imageSize?: string } | undefined {
  const output = geminiModel(upstreamModel)?.sizes.find((s) => s.size === `${width}x${height}`);
  if (!output) return undefined;
  return { aspectRatio: output.aspectRatio, ...(output.imageSize ? { imageSize: output.imageSize } : {}) };
}
