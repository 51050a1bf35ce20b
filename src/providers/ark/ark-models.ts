import type { InputImageLimits, UpstreamModelSpec } from '../model-spec';

const INT32_MAX = 2_147_483_647;
/** Byte limits are written "10MB" without saying which megabyte: the decimal one is taken (the smaller). */
const MB = 1_000_000;

/**
 * Ark, Seedream 5.0 lite / 4.5 / 4.0 `image` (BytePlus "Image generation API",
 * docs.byteplus.com/en/docs/ModelArk/1541523; volcengine.com/docs/82379/1541523): up to 14;
 * jpeg, png, webp, bmp, tiff, gif; width / height in 1/16…16; each side > 14 px; ≤ 10 MB;
 * width × height ≤ 6000×6000 (36,000,000, the product, not each side); references + outputs ≤ 15
 * per call (the gateway asks one image per call, so 14 inputs still fit). No mask parameter.
 * Sent inline as data URIs: Ark also takes URLs, but inline needs no gateway reachable from Ark.
 */
const SEEDREAM_INPUTS: InputImageLimits = {
  max_images: 14,
  formats: ['jpeg', 'png', 'webp', 'bmp', 'tiff', 'gif'],
  max_bytes: 10 * MB,
  min_ratio: 1 / 16,
  max_ratio: 16,
  min_side: 15,
  max_pixels: 36_000_000,
  max_inputs_plus_outputs: 15,
  mask: false,
  delivery: 'inline',
};

/** SeedEdit 3.0 `image` (same page): one image, JPEG or PNG, width / height in 1/3…3, sides > 14 px, ≤ 10 MB. */
const SEEDEDIT_INPUTS: InputImageLimits = {
  max_images: 1,
  formats: ['jpeg', 'png'],
  max_bytes: 10 * MB,
  min_ratio: 1 / 3,
  max_ratio: 3,
  min_side: 15,
  max_pixels: 36_000_000,
  mask: false,
  delivery: 'inline',
};

/**
 * Ark's image models (same page, "size", "seed", "sequential_image_generation", "output_format").
 * `seed` and `guidance_scale` only for Seedream 3.0 t2i and SeedEdit 3.0; group output
 * (`sequential_image_generation`) only for 5.0 lite / 4.5 / 4.0; `output_format` only for 5.0 lite.
 * The patterns match the Volcengine ids; BytePlus ids (no `doubao-`) and endpoint ids (`ep-…`) are
 * matched through the catalog's `upstream_family`.
 */
export const ARK_MODELS: readonly UpstreamModelSpec[] = [
  // 5.0 lite: `2K` | `3K` or WxH with width × height in [3,686,400, 10,404,496], ratio 1/16…16.
  {
    match: 'doubao-seedream-5-0-260128',
    family: 'seedream-5.0-lite',
    sizes: { min_pixels: 3_686_400, max_pixels: 10_404_496, min_ratio: 1 / 16, max_ratio: 16 },
    params: { sequential_image_generation: true, output_format: true },
    inputs: SEEDREAM_INPUTS,
  },
  {
    match: 'doubao-seedream-4-5-*',
    family: 'seedream-4.5',
    sizes: { min_pixels: 3_686_400, max_pixels: 16_777_216, min_ratio: 1 / 16, max_ratio: 16 },
    params: { sequential_image_generation: true },
    inputs: SEEDREAM_INPUTS,
  },
  {
    match: 'doubao-seedream-4-0-*',
    family: 'seedream-4.0',
    sizes: { min_pixels: 921_600, max_pixels: 16_777_216, min_ratio: 1 / 16, max_ratio: 16 },
    params: { sequential_image_generation: true },
    inputs: SEEDREAM_INPUTS,
  },
  // 3.0 t2i: width × height in [512², 2048²]; seed −1…2147483647; text only.
  {
    match: 'doubao-seedream-3-0-t2i-*',
    family: 'seedream-3.0-t2i',
    sizes: { min_pixels: 512 * 512, max_pixels: 2048 * 2048, min_ratio: 1 / 16, max_ratio: 16 },
    params: { seed: { max: INT32_MAX } },
  },
  // SeedEdit 3.0 i2i: `size` "Only support adaptive for now" (the output follows the input); seed.
  { match: 'doubao-seededit-3-0-i2i-*', family: 'seededit-3.0-i2i', params: { seed: { max: INT32_MAX }, fixed_size: 'adaptive' }, inputs: SEEDEDIT_INPUTS },
];
