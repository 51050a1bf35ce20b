import type { InputImageLimits, UpstreamModelSpec } from '../model-spec';
import { KONTEXT_RATIOS } from '../flux-kontext';

/**
 * The BFL models the gateway maps, declaratively: each model's endpoint (`POST /v1/{id}`), how the
 * request's size travels and how many reference images it takes (`input_image`, `input_image_2`, …).
 * Sources: BFL's API reference (docs.bfl.ai/api-reference, generated from api.bfl.ai/openapi.json)
 * and help.bfl.ai's "FLUX.2 Technical Specifications".
 */
export interface BflModel {
  spec: UpstreamModelSpec;
  /**
   * How the size travels: `width` and `height`, or `aspect_ratio` (the model picks the pixels, about
   * 1 MP), one of `ratios` keyed by the gateway's nominal size for it.
   */
  size: { field: 'width_height' } | { field: 'aspect_ratio'; ratios: Readonly<Record<string, string>> };
}

const MB = 1_000_000;

/**
 * BFL documents seeds as "integer | null" with no range; the gateway's own (0 … 2^32 − 1) is sent
 * as it is.
 */
const SEED = { max: 4_294_967_295 } as const;

/**
 * Reference images: `input_image` (and `_2` … `_8` for FLUX.2) is "Base64 encoded image or URL".
 * Sent inline as base64, so BFL needs no route to the gateway. BFL's reference gives no format or
 * byte limit: PNG, JPEG and WebP up to 10 MB is the gateway's own conservative bound (not checked
 * against a live account).
 */
function references(maxImages: number): InputImageLimits {
  return { max_images: maxImages, formats: ['jpeg', 'png', 'webp'], max_bytes: 10 * MB, mask: false, delivery: 'inline' };
}

export const BFL_CATALOG: readonly BflModel[] = [
  // FLUX1.1 [pro] (docs.bfl.ai/api-reference/models/generate-an-image-with-flux-11-[pro]): width and
  // height each 256…1440, multiples of 32; seed; output_format jpeg | png. No reference image (its
  // `image_prompt` is Redux conditioning, not mapped).
  {
    spec: {
      match: 'flux-pro-1.1',
      family: 'flux-pro-1.1',
      sizes: { min_pixels: 256 * 256, max_pixels: 1440 * 1440, min_ratio: 256 / 1440, max_ratio: 1440 / 256, min_side: 256, max_side: 1440, side_multiple: 32 },
      params: { seed: SEED, output_format: true },
    },
    size: { field: 'width_height' },
  },
  // FLUX.1 Kontext [pro] (docs.bfl.ai/api-reference/models/edit-or-create-an-image-with-flux-kontext-pro):
  // prompt, optional input_image (one; `_2`…`_4` are "Experimental Multiref", not mapped),
  // aspect_ratio 21:9…9:21, seed, output_format jpeg | png.
  {
    spec: {
      match: 'flux-kontext-pro',
      family: 'flux-kontext-pro',
      sizes: { min_pixels: 1280 * 720, max_pixels: 1568 * 672, min_ratio: 9 / 21, max_ratio: 21 / 9, allowed_sizes: Object.keys(KONTEXT_RATIOS) },
      params: { seed: SEED, output_format: true },
      inputs: references(1),
    },
    size: { field: 'aspect_ratio', ratios: KONTEXT_RATIOS },
  },
  // FLUX.2 [pro] (docs.bfl.ai/api-reference/models/generate-or-edit-an-image-with-flux2-[pro]: width,
  // height ≥ 64, input_image … input_image_8, seed, output_format jpeg | png; help.bfl.ai "FLUX.2
  // Technical Specifications": at least 64×64, at most 4 megapixels (2048×2048), sides multiples
  // of 16, up to 8 reference images by API). No ratio bound is documented: 1/1024…1024 is what the
  // side and pixel bounds allow.
  {
    spec: {
      match: 'flux-2-pro',
      family: 'flux-2-pro',
      sizes: { min_pixels: 64 * 64, max_pixels: 2048 * 2048, min_ratio: 1 / 1024, max_ratio: 1024, min_side: 64, side_multiple: 16 },
      params: { seed: SEED, output_format: true },
      inputs: references(8),
    },
    size: { field: 'width_height' },
  },
];

/** The row for a model id (or a catalog entry's declared family). */
export function bflModel(upstreamModel: string, family?: string): BflModel | undefined {
  if (family !== undefined) return BFL_CATALOG.find((model) => model.spec.family === family);
  return BFL_CATALOG.find((model) => model.spec.match === upstreamModel);
}

export const BFL_MODELS: readonly UpstreamModelSpec[] = BFL_CATALOG.map((model) => model.spec);
