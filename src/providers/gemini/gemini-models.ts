import { findModelSpec, type InputImageLimits, type SizeBounds, type UpstreamModelSpec } from '../model-spec';

/**
 * Gemini's image models take no width and height: an aspect ratio (`imageConfig.aspectRatio`) and, on
 * the 3.x models, a size tier (`imageConfig.imageSize`: 1K, 2K, 4K), each pair making one documented
 * output size. The gateway's `WxH` sizes are those outputs, so a client asks for exactly what it gets
 * and any other size is refused before anything is charged.
 * Source: ai.google.dev/gemini-api/docs/image-generation, "Aspect ratios and image size" (one table per
 * model: 2.5 Flash Image 1K only; 3 Pro Image and 3.1 Flash Image 1K, 2K, 4K); `ImageConfig` of the
 * official SDK (googleapis/js-genai src/types.ts: `aspectRatio`, `imageSize` "1K", "2K", "4K").
 */
export interface GeminiOutputSize {
  size: string;
  aspectRatio: string;
  /** Absent for models that take no `imageSize` (2.5 Flash Image). */
  imageSize?: '1K' | '2K' | '4K';
}

/** Gemini 2.5 Flash Image: one output per aspect ratio (about 1 MP, 1290 output tokens each). */
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

type TierRow = readonly [aspectRatio: string, k1: string, k2: string, k4: string];

/** Per aspect ratio, the 1K, 2K and 4K outputs (the 3.x models' tables). */
const TIERED_3: readonly TierRow[] = [
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
];

/**
 * Gemini 3.1 Flash Image adds four extreme ratios to the 3.x table (same pixels as 3 Pro for the ten
 * shared ratios). Its 512 px tier is not offered: its `imageSize` value is spelled "512" by Google's
 * Vertex model page and "0.5K" elsewhere, and its published 21:9 row (792x168) is not 21:9; neither
 * could be checked against a live account.
 */
const EXTREME_3_1: readonly TierRow[] = [
  ['1:4', '512x2048', '1024x4096', '2048x8192'],
  ['4:1', '2048x512', '4096x1024', '8192x2048'],
  ['1:8', '384x3072', '768x6144', '1536x12288'],
  ['8:1', '3072x384', '6144x768', '12288x1536'],
];

const tiered = (rows: readonly TierRow[]): GeminiOutputSize[] =>
  rows.flatMap(([aspectRatio, k1, k2, k4]) => [
    { aspectRatio, size: k1, imageSize: '1K' as const },
    { aspectRatio, size: k2, imageSize: '2K' as const },
    { aspectRatio, size: k4, imageSize: '4K' as const },
  ]);

/** A side of 10,000 px or more does not fit the API's `size` (`WxH`, up to four digits a side). */
const requestable = (output: GeminiOutputSize) => output.size.split('x').every((side) => side.length <= 4);

const PRO_3 = tiered(TIERED_3);
// 1:8 and 8:1 at 4K (1536x12288, 12288x1536) are left out by `requestable`.
const FLASH_3_1 = tiered([...TIERED_3, ...EXTREME_3_1]).filter(requestable);

/** The size rule of an enumerated table: exactly its sizes (the pixel and ratio bounds are theirs). */
function boundsOf(outputs: readonly GeminiOutputSize[]): SizeBounds {
  const dims = outputs.map(({ size }) => size.split('x').map(Number) as [number, number]);
  const pixels = dims.map(([w, h]) => w * h);
  const ratios = dims.map(([w, h]) => w / h);
  return {
    min_pixels: Math.min(...pixels),
    max_pixels: Math.max(...pixels),
    min_ratio: Math.min(...ratios),
    max_ratio: Math.max(...ratios),
    allowed_sizes: outputs.map(({ size }) => size),
  };
}

/**
 * Reference images as `inline_data` parts: PNG, JPEG or WebP (the formats the gateway sniffs that
 * the models list; HEIC/HEIF too upstream), each at most 7 MB inline (Vertex AI's model pages: "Maximum
 * file size per file for inline data: 7 MB"; a whole Gemini API request stays under 20 MB). 2.5 Flash
 * Image takes up to 3 ("works best with up to 3 images"), the 3.x models up to 14. No mask: an edit
 * is described in the prompt.
 */
const MB = 1_000_000;
const inputs = (maxImages: number): InputImageLimits => ({
  max_images: maxImages,
  formats: ['png', 'jpeg', 'webp'],
  max_bytes: 7 * MB,
  mask: false,
  delivery: 'inline',
});

export interface GeminiModel {
  spec: UpstreamModelSpec;
  sizes: readonly GeminiOutputSize[];
}

const model = (match: string, family: string, sizes: readonly GeminiOutputSize[], maxImages: number): GeminiModel => ({
  // No `seed` in params: the image models document none, so none is sent.
  spec: { match, family, sizes: boundsOf(sizes), params: {}, inputs: inputs(maxImages) },
  sizes,
});

/**
 * The model ids (`models/{id}:generateContent`). The 3.x models went GA as `gemini-3-pro-image` and
 * `gemini-3.1-flash-image` (google-gemini/cookbook commit 4ae2695, 2026-05-28, "update visual model
 * names to GA"); the trailing `*` keeps their `-preview` ids.
 */
export const GEMINI_MODELS: readonly GeminiModel[] = [
  model('gemini-2.5-flash-image', 'gemini-2.5-flash-image', FLASH_2_5, 3),
  model('gemini-3-pro-image*', 'gemini-3-pro-image', PRO_3, 14),
  model('gemini-3.1-flash-image*', 'gemini-3.1-flash-image', FLASH_3_1, 14),
];

export const GEMINI_MODEL_SPECS: readonly UpstreamModelSpec[] = GEMINI_MODELS.map((row) => row.spec);

/** The row for an upstream id, or for the catalog entry's declared family (which wins). */
export function geminiModel(upstreamModel: string, family?: string): GeminiModel | undefined {
  const spec = findModelSpec(GEMINI_MODEL_SPECS, upstreamModel, family);
  return GEMINI_MODELS.find((row) => row.spec === spec);
}

/** The `imageConfig` that makes `width`×`height` on the model, or undefined when it makes no such size. */
export function imageConfigFor(upstreamModel: string, width: number, height: number, family?: string): { aspectRatio: string; imageSize?: string } | undefined {
  const output = geminiModel(upstreamModel, family)?.sizes.find((s) => s.size === `${width}x${height}`);
  if (!output) return undefined;
  return { aspectRatio: output.aspectRatio, ...(output.imageSize ? { imageSize: output.imageSize } : {}) };
}
