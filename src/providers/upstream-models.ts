import { ApiError } from '../errors/api-error';

/** A model's documented output sizes: pixel count and aspect ratio (width / height), optionally each side. */
export interface SizeBounds {
  min_pixels: number;
  max_pixels: number;
  min_ratio: number;
  max_ratio: number;
  min_side?: number;
  max_side?: number;
}

/** Image formats a model may take as inputs, named as the gateway sniffs them from the bytes. */
export type InputImageFormat = 'png' | 'jpeg' | 'webp' | 'bmp' | 'tiff' | 'gif';

/** What a model takes as input images (references, edits), as its upstream documents it. */
export interface InputImageLimits {
  /** Most input images per request. */
  max_images: number;
  formats: readonly InputImageFormat[];
  /** Largest input image, in bytes. */
  max_bytes: number;
  /** Bounds on each input's width / height and pixel count. */
  min_ratio?: number;
  max_ratio?: number;
  max_side?: number;
  min_side?: number;
  max_pixels?: number;
  /** Inputs plus requested outputs at most this many (Ark Seedream: 15). */
  max_inputs_plus_outputs?: number;
  /** Whether it takes a mask (edits with a transparent area to repaint). */
  mask: boolean;
  /** How the upstream receives them: in the request body (`inline`: data URIs) or as URLs it fetches itself (`url`: the gateway's signed URLs). */
  delivery: 'inline' | 'url';
}

/**
 * What each upstream model documents, in one table: the output sizes it takes and the optional
 * request fields it reads. The gateway refuses other sizes before charging, and sends an upstream
 * only the optional fields listed for it. docs/operators/providers.md shows the same table with sources.
 */
export interface UpstreamModelSpec {
  /** Upstream model id (Ark) or req_key (visual API); a trailing `*` matches the dated ids (`doubao-seedream-4-5-251128`). */
  match: string;
  sizes?: SizeBounds;
  /** Optional fields it documents. `seed`: its largest value (the gateway's seed + image index is sent modulo max + 1). */
  params: { seed?: { max: number }; force_single?: true };
  /** Input images it takes; none when absent. */
  inputs?: InputImageLimits;
}

const INT32_MAX = 2_147_483_647;

export const UPSTREAM_MODELS: readonly UpstreamModelSpec[] = [
  // Built in: sides 16…1024 (LocalProvider), seed makes the picture deterministic.
  {
    match: 'local-1',
    sizes: { min_pixels: 16 * 16, max_pixels: 1024 * 1024, min_ratio: 1 / 64, max_ratio: 64, min_side: 16, max_side: 1024 },
    params: { seed: { max: 4_294_967_295 } },
    inputs: { max_images: 4, formats: ['png', 'jpeg', 'webp', 'gif', 'bmp', 'tiff'], max_bytes: 10 * 1024 * 1024, mask: true, delivery: 'inline' },
  },
  // Visual API, Jimeng 4.0: width × height in [1024², 4096²], width / height in [min_ratio, max_ratio] (default 1/3…3); no seed.
  { match: 'jimeng_t2i_v40', sizes: { min_pixels: 1024 * 1024, max_pixels: 4096 * 4096, min_ratio: 1 / 3, max_ratio: 3 }, params: { force_single: true } },
  // Visual API, Jimeng 3.1: seed (default -1), no force_single. Sizes: recommended 1328² (1K) to 2048² / 3024×1296 (2K);
  // no official bound found, these follow the recommended table (re-check before narrowing them).
  { match: 'jimeng_t2i_v31', sizes: { min_pixels: 512 * 512, max_pixels: 2048 * 2048, min_ratio: 1 / 3, max_ratio: 3 }, params: { seed: { max: INT32_MAX } } },
  // Ark, Seedream 4.5 / 4.0: total pixels and ratio 1/16…16; `seed` is ignored by 4.x, so not sent.
  { match: 'doubao-seedream-4-5-*', sizes: { min_pixels: 3_686_400, max_pixels: 16_777_216, min_ratio: 1 / 16, max_ratio: 16 }, params: {} },
  { match: 'doubao-seedream-4-0-*', sizes: { min_pixels: 921_600, max_pixels: 16_777_216, min_ratio: 1 / 16, max_ratio: 16 }, params: {} },
  // Ark models that take a seed (−1…2147483647); sizes not checked here.
  { match: 'doubao-seedream-3-0-t2i-*', params: { seed: { max: INT32_MAX } } },
  { match: 'doubao-seededit-3-0-i2i-*', params: { seed: { max: INT32_MAX } } },
];

/** The table's entry for an upstream model id, if it has one. */
export function upstreamModelSpec(upstreamModel: string): UpstreamModelSpec | undefined {
  return UPSTREAM_MODELS.find((spec) => (spec.match.endsWith('*') ? upstreamModel.startsWith(spec.match.slice(0, -1)) : upstreamModel === spec.match));
}

/**
 * The seed to send for the image at `index`, or undefined when the upstream takes none. Models
 * the table does not know get `seed + index`: they are mostly operators' OpenAI-compatible servers,
 * which may honour a seed, and the table lists the models known to take none.
 */
export function upstreamSeed(upstreamModel: string, seed: number | undefined, index: number): number | undefined {
  if (seed === undefined) return undefined;
  const spec = upstreamModelSpec(upstreamModel);
  if (!spec) return seed + index;
  if (!spec.params.seed) return undefined;
  // Wrapped into the upstream's range: the same gateway seed always sends the same upstream seed.
  return (seed + index) % (spec.params.seed.max + 1);
}

/** Why `width`×`height` is outside `bounds`, or undefined when it is inside. */
export function sizeOutOfBounds(width: number, height: number, bounds: SizeBounds): string | undefined {
  const pixels = width * height;
  const ratio = width / height;
  if (bounds.min_side !== undefined && Math.min(width, height) < bounds.min_side) return `each side must be at least ${bounds.min_side} px`;
  if (bounds.max_side !== undefined && Math.max(width, height) > bounds.max_side) return `each side must be at most ${bounds.max_side} px`;
  if (pixels < bounds.min_pixels) return `width × height must be at least ${bounds.min_pixels} pixels (it is ${pixels})`;
  if (pixels > bounds.max_pixels) return `width × height must be at most ${bounds.max_pixels} pixels (it is ${pixels})`;
  if (ratio < bounds.min_ratio || ratio > bounds.max_ratio) return `width / height must be between ${formatRatio(bounds.min_ratio)} and ${formatRatio(bounds.max_ratio)}`;
  return undefined;
}

function formatRatio(ratio: number): string {
  return ratio < 1 ? `1/${Math.round(1 / ratio)}` : String(ratio);
}

/** 400 invalid_request (param `size`) for a size the model's upstream would refuse; checked before anything is charged. */
export function checkSize(model: string, width: number, height: number, bounds: SizeBounds | undefined): void {
  if (!bounds) return;
  const why = sizeOutOfBounds(width, height, bounds);
  if (why) throw new ApiError('invalid_request', `Size ${width}x${height} is not available on model ${model}: ${why}.`, { param: 'size' });
}
