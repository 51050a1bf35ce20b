import type { InputImageLimits, SizeBounds, UpstreamModelSpec } from '../model-spec';
import { KONTEXT_RATIOS } from '../flux-kontext';

/**
 * The fal apps the gateway maps, declaratively: each app's own input schema names where a request's
 * size, `n`, seed and reference images go. Sources: each app's OpenAPI schema as fal publishes it
 * (fal.ai/models/<app>/api; the same schemas generate fal's JS client types, fal-ai/fal-js
 * libs/client/src/types/image/zod.gen.ts: zFluxDevInput, zFluxProV11Input, zFluxProKontextInput).
 */
export interface FalApp {
  spec: UpstreamModelSpec;
  /**
   * How the request's size travels: `image_size` as `{width, height}` (the schema's ImageSize object,
   * each side ≤ 14142), or `aspect_ratio`, one of `ratios` (the app picks the pixels, about 1 MP).
   */
  size: { field: 'image_size' } | { field: 'aspect_ratio'; ratios: Readonly<Record<string, string>> };
  /** Where reference images go: none, `image_url` (exactly one, required), or `image_urls` (a list). */
  references: 'none' | 'image_url' | 'image_urls';
}

const MB = 1_000_000;

/** fal's ImageSize: each side an integer ≤ 14142 (no documented minimum or grid). */
const IMAGE_SIZE: SizeBounds = { min_pixels: 1, max_pixels: 14142 * 14142, min_ratio: 1 / 14142, max_ratio: 14142, max_side: 14142 };

/**
 * Reference images: `image_url` takes a URL fal fetches or a data URI; the gateway sends its signed
 * URL (`delivery: url`), so the queued request stays small and fal reads the bytes whenever the
 * request leaves the queue. fal's schema gives no format or byte limit: PNG, JPEG and WebP up to
 * 10 MB is the gateway's own conservative bound (not checked against a live account).
 */
const KONTEXT_INPUT: InputImageLimits = { max_images: 1, formats: ['jpeg', 'png', 'webp'], max_bytes: 10 * MB, mask: false, delivery: 'url' };

/** fal's seeds are plain integers; the gateway's own range (0 … 2^32 − 1) is sent as it is. */
const SEED = { seed: { max: 4_294_967_295 } } as const;

export const FAL_APPS: readonly FalApp[] = [
  // FLUX.1 [dev]: num_images 1…4, image_size, seed, no image input (fal.ai/models/fal-ai/flux/dev/api).
  { spec: { match: 'fal-ai/flux/dev', family: 'fal-flux-dev', sizes: IMAGE_SIZE, params: SEED }, size: { field: 'image_size' }, references: 'none' },
  // FLUX1.1 [pro]: num_images 1…4, image_size, seed (fal.ai/models/fal-ai/flux-pro/v1.1/api).
  { spec: { match: 'fal-ai/flux-pro/v1.1', family: 'fal-flux-pro-1.1', sizes: IMAGE_SIZE, params: SEED }, size: { field: 'image_size' }, references: 'none' },
  // FLUX.1 Kontext [pro]: one required image_url, aspect_ratio, num_images 1…4, seed (fal.ai/models/fal-ai/flux-pro/kontext/api).
  {
    spec: {
      match: 'fal-ai/flux-pro/kontext',
      family: 'fal-flux-kontext-pro',
      sizes: { min_pixels: 1280 * 720, max_pixels: 1568 * 672, min_ratio: 9 / 21, max_ratio: 21 / 9, allowed_sizes: Object.keys(KONTEXT_RATIOS) },
      params: SEED,
      inputs: KONTEXT_INPUT,
    },
    size: { field: 'aspect_ratio', ratios: KONTEXT_RATIOS },
    references: 'image_url',
  },
];

/** The app row for an app id (or a catalog entry's declared family). */
export function falApp(upstreamModel: string, family?: string): FalApp | undefined {
  if (family !== undefined) return FAL_APPS.find((app) => app.spec.family === family);
  return FAL_APPS.find((app) => app.spec.match === upstreamModel);
}

export const FAL_MODELS: readonly UpstreamModelSpec[] = FAL_APPS.map((app) => app.spec);
