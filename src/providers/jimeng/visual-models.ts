import type { UpstreamModelSpec } from '../model-spec';

const INT32_MAX = 2_147_483_647;
/** Byte limits are written "15MB" without saying which megabyte: the decimal one is taken (the smaller). */
const MB = 1_000_000;

/** The visual API's req_keys (docs/operators/providers.md lists them with their public sources). */
export const VISUAL_MODELS: readonly UpstreamModelSpec[] = [
  // Jimeng 4.0 ("即梦4.0" doc, volcengine.com/docs/85621/1817045): width × height in [1024², 4096²],
  // width / height in [min_ratio, max_ratio], which default to 1/3 and 3 and may be sent in [1/16, 16).
  // The gateway admits [1/16, 16) (16:1 itself would need a max_ratio of 16) and sends min_ratio /
  // max_ratio only for a request outside the defaults. No seed.
  // `image_urls`: 0…10 URLs the API fetches itself; JPEG or PNG only; ≤ 15 MB; at most 4096×4096;
  // width / height in 1/3…3; outputs ≤ 15 − inputs (force_single: one per task). No mask.
  {
    match: 'jimeng_t2i_v40',
    family: 'jimeng-4.0',
    sizes: { min_pixels: 1024 * 1024, max_pixels: 4096 * 4096, min_ratio: 1 / 16, max_ratio: 16, max_ratio_exclusive: true },
    params: { force_single: true, ratio_bounds: { default_min: 1 / 3, default_max: 3 } },
    inputs: {
      max_images: 10,
      formats: ['jpeg', 'png'],
      max_bytes: 15 * MB,
      min_ratio: 1 / 3,
      max_ratio: 3,
      max_side: 4096,
      max_inputs_plus_outputs: 15,
      mask: false,
      delivery: 'url',
    },
  },
  // Jimeng 3.1 (volcengine.com/docs/85621/1756900): seed (default -1), no force_single, no input images
  // (its Body table is req_key, prompt, seed, width, height, use_pre_llm). Sizes: recommended 1328² (1K)
  // to 2048² / 3024×1296 (2K); no official bound found, these follow the recommended table.
  {
    match: 'jimeng_t2i_v31',
    family: 'jimeng-3.1',
    sizes: { min_pixels: 512 * 512, max_pixels: 2048 * 2048, min_ratio: 1 / 3, max_ratio: 3 },
    params: { seed: { max: INT32_MAX } },
  },
];
