import type { components } from '../../generated/gateway';
import { ApiError } from '../errors/api-error';

/**
 * A model's documented output sizes: pixel count and aspect ratio (width / height), optionally each
 * side, a grid both sides must sit on, or an enumerated set of sizes (OpenAI's GPT image models).
 * The spec's schema, which `GET /v1/models` serves as each model's `size_bounds`.
 */
export type SizeBounds = components['schemas']['SizeBounds'];

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

/** The optional request fields a model documents; the gateway sends an upstream only these. */
export interface UpstreamModelParams {
  /** Its seed's largest value (the gateway's seed + image index is sent modulo max + 1). */
  seed?: { max: number };
  /** Visual API: one image per task (else a task may make, and bill, several). */
  force_single?: true;
  /** Ark: `sequential_image_generation` (group output), sent `disabled`: the gateway asks one image per call. */
  sequential_image_generation?: true;
  /** Ark: `output_format` (`png` | `jpeg`); passed through from the catalog's `upstream_options`. */
  output_format?: true;
  /**
   * The `size` value it takes instead of `WxH` (SeedEdit 3.0: only `adaptive`, the output follows
   * the input image).
   */
  fixed_size?: string;
  /**
   * Visual API: `min_ratio` / `max_ratio` widen the ratio the model accepts (defaults `default`);
   * sent only for a request whose ratio lies outside the defaults.
   */
  ratio_bounds?: { default_min: number; default_max: number };
  /**
   * The output options it reads (OpenAI's names: `quality`, `background`, …) and the values each
   * takes. A client's option the model documents is sent (a value it does not take is refused
   * before anything is charged); one it does not document is not sent.
   */
  image_options?: ImageOptions;
}

/** The output options a request may carry besides its size, named as OpenAI's Images API names them (provider.ts ProviderImageOptions, and `quality`). */
export type ImageOptionName = 'quality' | 'background' | 'output_format' | 'output_compression' | 'moderation' | 'style' | 'input_fidelity';

/** What a model documents for one output option: an enumeration, or an integer range. */
export type ImageOptionRule = ({ readonly values: readonly string[] } | { readonly min: number; readonly max: number }) & {
  /** Read only on requests without input images (`text`: OpenAI's generations) or only on those with some (`inputs`: its edits). */
  readonly only?: 'text' | 'inputs';
  /** When the option has the value `when`, the option `field` (when given) must be one of `values`. */
  readonly requires?: { readonly when: string; readonly field: ImageOptionName; readonly values: readonly string[] };
};

/** A model's output options and their rules. */
export type ImageOptions = Readonly<Partial<Record<ImageOptionName, ImageOptionRule>>>;

/**
 * What one upstream model documents: the output sizes it takes, the optional request fields it reads
 * and the input images it takes. The gateway refuses other sizes before charging. Each wire format's
 * descriptor lists its rows; docs/operators/providers.md shows them with their public sources.
 */
export interface UpstreamModelSpec {
  /** Upstream model id (Ark) or req_key (visual API); a trailing `*` matches the dated ids (`doubao-seedream-4-5-251128`). */
  match: string;
  /**
   * The model family, for catalog entries whose upstream id the pattern cannot know (BytePlus ids
   * without `doubao-`, Ark endpoint ids `ep-…`): catalog `upstream_family`.
   */
  family: string;
  sizes?: SizeBounds;
  params: UpstreamModelParams;
  /** Input images it takes; none when absent. */
  inputs?: InputImageLimits;
  /**
   * Most images one call makes, on a format whose calls take `n` (`one-for-n`): n images cost
   * ceil(n / this) calls (dall-e-3: 1). No limit when absent.
   */
  max_images_per_call?: number;
  /** Longest prompt it takes, in characters (Unicode code points); DEFAULT_MAX_PROMPT_CHARS when absent. */
  max_prompt_chars?: number;
}

/** The longest prompt of a model whose upstream documents no limit, in characters. */
export const DEFAULT_MAX_PROMPT_CHARS = 4000;
/**
 * The longest prompt any model takes (OpenAI's GPT image models: 32,000): the spec's `maxLength` of
 * every `prompt` (test/unit/prompt-limits.test.ts checks they agree), and what bounds a multipart
 * text field.
 */
export const LARGEST_PROMPT_CHARS = 32_000;

/** The longest prompt `spec`'s model takes, in characters. */
export function maxPromptChars(spec: Pick<UpstreamModelSpec, 'max_prompt_chars'> | undefined): number {
  return spec?.max_prompt_chars ?? DEFAULT_MAX_PROMPT_CHARS;
}

/**
 * 400 invalid_request (param `prompt`) for a prompt longer than the model takes, checked before anything
 * is charged. Characters are Unicode code points, as the spec's `maxLength` counts them.
 */
export function checkPromptLength(model: string, prompt: string, spec: Pick<UpstreamModelSpec, 'max_prompt_chars'> | undefined): void {
  const max = maxPromptChars(spec);
  // Code points are never more than UTF-16 units: most prompts need no count.
  if (prompt.length <= max) return;
  let chars = 0;
  for (const _ of prompt) chars += 1;
  if (chars > max) {
    throw new ApiError('invalid_request', `prompt: ${chars} characters; model ${model} takes at most ${max}.`, { param: 'prompt' });
  }
}

/** The row of `table` for an upstream id, or for its declared family (which wins). */
export function findModelSpec(table: readonly UpstreamModelSpec[], upstreamModel: string, family?: string): UpstreamModelSpec | undefined {
  if (family !== undefined) return table.find((spec) => spec.family === family);
  return table.find((spec) => (spec.match.endsWith('*') ? upstreamModel.startsWith(spec.match.slice(0, -1)) : upstreamModel === spec.match));
}

/**
 * The seed to send for the image at `index`, or undefined when the upstream takes none. Models
 * no table knows get `seed + index`: they are mostly operators' OpenAI-compatible servers,
 * which may honour a seed, and the tables list the models known to take none.
 */
export function seedFor(spec: UpstreamModelSpec | undefined, seed: number | undefined, index: number): number | undefined {
  if (seed === undefined) return undefined;
  if (!spec) return seed + index;
  if (!spec.params.seed) return undefined;
  // Wrapped into the upstream's range: the same gateway seed always sends the same upstream seed.
  return (seed + index) % (spec.params.seed.max + 1);
}

/** Why `width`×`height` is outside `bounds`, or undefined when it is inside. */
export function sizeOutOfBounds(width: number, height: number, bounds: SizeBounds): string | undefined {
  const pixels = width * height;
  const ratio = width / height;
  if (bounds.allowed_sizes !== undefined && !bounds.allowed_sizes.includes(`${width}x${height}`))
    return `the size must be one of ${bounds.allowed_sizes.join(', ')}`;
  if (bounds.side_multiple !== undefined && (width % bounds.side_multiple !== 0 || height % bounds.side_multiple !== 0))
    return `each side must be a multiple of ${bounds.side_multiple} px`;
  if (bounds.min_side !== undefined && Math.min(width, height) < bounds.min_side) return `each side must be at least ${bounds.min_side} px`;
  if (bounds.max_side !== undefined && Math.max(width, height) > bounds.max_side) return `each side must be at most ${bounds.max_side} px`;
  if (pixels < bounds.min_pixels) return `width × height must be at least ${bounds.min_pixels} pixels (it is ${pixels})`;
  if (pixels > bounds.max_pixels) return `width × height must be at most ${bounds.max_pixels} pixels (it is ${pixels})`;
  if (bounds.max_ratio_exclusive && (ratio < bounds.min_ratio || ratio >= bounds.max_ratio)) {
    return `width / height must be at least ${formatRatio(bounds.min_ratio)} and below ${formatRatio(bounds.max_ratio)}`;
  }
  if (ratio < bounds.min_ratio || ratio > bounds.max_ratio)
    return `width / height must be between ${formatRatio(bounds.min_ratio)} and ${formatRatio(bounds.max_ratio)}`;
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

/** `WxH` or `W×H` (Ark writes both) as numbers; undefined when it is neither. */
export function parseSize(text: string | undefined): { width: number; height: number } | undefined {
  const match = text === undefined ? null : /^\s*(\d+)\s*[x×]\s*(\d+)\s*$/.exec(text);
  return match ? { width: Number(match[1]), height: Number(match[2]) } : undefined;
}

/** Why `value` is not one the rule documents, or undefined when it is. */
function ruleRefusal(rule: ImageOptionRule, value: unknown): string | undefined {
  if ('values' in rule) return typeof value === 'string' && rule.values.includes(value) ? undefined : `it takes ${rule.values.join(', ')}`;
  return typeof value === 'number' && Number.isInteger(value) && value >= rule.min && value <= rule.max
    ? undefined
    : `it takes an integer from ${rule.min} to ${rule.max}`;
}

/**
 * The output options of a request to send to `spec`'s model: those it documents for a request with
 * (or without) input images. A documented option with a value the model does not take is 400
 * `invalid_request` naming the option: the generation service asks this before anything is reserved,
 * the client again for what it sends. Options the model does not document (or a model the tables do
 * not know) are left out.
 */
export function imageOptionsFor(
  model: string,
  spec: Pick<UpstreamModelSpec, 'params'> | undefined,
  options: Readonly<Record<string, unknown>>,
  withInputs: boolean,
): Partial<Record<ImageOptionName, string | number>> {
  const rules = Object.entries(spec?.params.image_options ?? {}) as Array<[ImageOptionName, ImageOptionRule]>;
  const sent: Partial<Record<ImageOptionName, string | number>> = {};
  for (const [field, rule] of rules) {
    const value = options[field];
    if (value === undefined || value === null || rule.only === (withInputs ? 'text' : 'inputs')) continue;
    const why = ruleRefusal(rule, value);
    if (why) throw new ApiError('invalid_request', `${field} ${JSON.stringify(value)} is not available on model ${model}: ${why}.`, { param: field });
    sent[field] = value as string | number;
  }
  for (const [field, { requires }] of rules) {
    const other = requires && sent[field] === requires.when ? sent[requires.field] : undefined;
    if (requires && other !== undefined && !requires.values.includes(String(other))) {
      throw new ApiError(
        'invalid_request',
        `${field} ${JSON.stringify(requires.when)} needs ${requires.field} ${requires.values.join(' or ')} on model ${model}.`,
        { param: field },
      );
    }
  }
  return sent;
}
