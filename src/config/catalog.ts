import { type InputImageLimits, type SizeBounds, sizeOutOfBounds, UPSTREAM_FAMILIES, upstreamModelSpec } from '../providers/upstream-models';
import { inputLimits } from './input-limits';
import { type PriceRow, parsePriceTable } from './price-table';
import { OPENAI_IMAGE_MODELS, proposedPriceTable } from '../providers/openai/models';

export type { InputImageLimits, SizeBounds };

/** One model a client may ask for, and how the gateway serves and prices it. */
export interface CatalogModel {
  /** The id clients send as `model`. */
  model: string;
  /** Provider that serves it; a key must allow this provider. */
  provider: string;
  /** The model id the provider's upstream understands. */
  upstream_model: string;
  credits_per_image: number;
  /** Credits per image by size and quality (price-table.ts); `credits_per_image` where no row fits. */
  price_table?: PriceRow[];
  /** Used when the request has no `size`. */
  default_size: string;
  /** For providers with several upstream APIs (jimeng: `visual` or `ark`). */
  transport?: string;
  /**
   * The model family of its format's table (src/providers/<format>/*-models.ts) when `upstream_model`
   * does not say it: BytePlus ids (`seedream-4-5-251128`), Ark endpoint ids (`ep-…`).
   */
  upstream_family?: string;
  /** Extra fields sent to the upstream as they are, e.g. `{"scale": 0.5}` for the visual API. */
  upstream_options?: Record<string, unknown>;
  /** Sizes other than these are refused with 400 before charging; by default the upstream model's (upstream-models.ts). */
  size_bounds?: SizeBounds;
  /** Input images (references, edits) it takes; none when absent. By default the upstream model's (upstream-models.ts). */
  input_limits?: InputImageLimits;
}

/** The upstream model's documented sizes (none for models the table does not know). */
function boundsOf(upstreamModel: string, family?: string): { size_bounds?: SizeBounds } {
  const sizes = upstreamModelSpec(upstreamModel, family)?.sizes;
  return sizes ? { size_bounds: sizes } : {};
}

/** The upstream model's documented input images (none for models the table does not know, or that take none). */
function inputsOf(upstreamModel: string, family?: string): { input_limits?: InputImageLimits } {
  const inputs = upstreamModelSpec(upstreamModel, family)?.inputs;
  return inputs ? { input_limits: inputs } : {};
}

/** What the table documents for an upstream model the catalog does not list (trusted callers may address one). */
export function upstreamLimitsOf(upstreamModel: string): Pick<CatalogModel, 'size_bounds' | 'input_limits'> {
  return { ...boundsOf(upstreamModel), ...inputsOf(upstreamModel) };
}

export type ModelCatalog = ReadonlyMap<string, CatalogModel>;

/** Price rows by named size tier: `[tier, credits, largest output (width × height) of the tier]`; the last row takes the rest. */
function tiers(...rows: Array<[tier: string, credits: number, maxPixels?: number]>): PriceRow[] {
  return rows.map(([tier, credits, maxPixels]) => ({ tier, credits, ...(maxPixels === undefined ? {} : { max_pixels: maxPixels }) }));
}

export const DEFAULT_CATALOG: CatalogModel[] = [
  { model: 'local-1', provider: 'local', upstream_model: 'local-1', credits_per_image: 1, default_size: '256x256', ...upstreamLimitsOf('local-1') },
  // Jimeng 4.5 is Seedream 4.5, served through Ark (the visual API has no 4.5 req_key).
  {
    model: 'jimeng-4.5',
    provider: 'jimeng',
    transport: 'ark',
    upstream_model: 'doubao-seedream-4-5-251128',
    credits_per_image: 4,
    default_size: '2048x2048',
    ...upstreamLimitsOf('doubao-seedream-4-5-251128'),
  },
  // Seedream 5.0 lite, through Ark: 2K / 3K sizes (3,686,400…10,404,496 pixels).
  {
    model: 'jimeng-5.0-lite',
    provider: 'jimeng',
    transport: 'ark',
    upstream_model: 'doubao-seedream-5-0-260128',
    credits_per_image: 4,
    default_size: '2048x2048',
    ...upstreamLimitsOf('doubao-seedream-5-0-260128'),
  },
  { model: 'jimeng-4.0', provider: 'jimeng', transport: 'visual', upstream_model: 'jimeng_t2i_v40', credits_per_image: 3, default_size: '2048x2048', ...upstreamLimitsOf('jimeng_t2i_v40') },
  { model: 'jimeng-3.1', provider: 'jimeng', transport: 'visual', upstream_model: 'jimeng_t2i_v31', credits_per_image: 2, default_size: '1328x1328', ...upstreamLimitsOf('jimeng_t2i_v31') },
  // fal.ai's queue: FLUX apps (they serve once a `fal` channel exists: FAL_KEY or the channels API).
  { model: 'fal-flux-dev', provider: 'fal', upstream_model: 'fal-ai/flux/dev', credits_per_image: 3, default_size: '1024x1024', ...upstreamLimitsOf('fal-ai/flux/dev') },
  { model: 'fal-flux-pro-1.1', provider: 'fal', upstream_model: 'fal-ai/flux-pro/v1.1', credits_per_image: 4, default_size: '1024x1024', ...upstreamLimitsOf('fal-ai/flux-pro/v1.1') },
  { model: 'fal-flux-kontext-pro', provider: 'fal', upstream_model: 'fal-ai/flux-pro/kontext', credits_per_image: 4, default_size: '1024x1024', ...upstreamLimitsOf('fal-ai/flux-pro/kontext') },
  // Black Forest Labs' FLUX API (they serve once a `bfl` channel exists: BFL_API_KEY or the channels API).
  // FLUX.2 [pro] is priced per megapixel by BFL (3 cents the first, 1.5 each further one): a tier per MP, rounded up.
  { model: 'flux-pro-1.1', provider: 'bfl', upstream_model: 'flux-pro-1.1', credits_per_image: 4, default_size: '1024x768', ...upstreamLimitsOf('flux-pro-1.1') },
  { model: 'flux-kontext-pro', provider: 'bfl', upstream_model: 'flux-kontext-pro', credits_per_image: 4, default_size: '1024x1024', ...upstreamLimitsOf('flux-kontext-pro') },
  {
    model: 'flux-2-pro',
    provider: 'bfl',
    upstream_model: 'flux-2-pro',
    credits_per_image: 8,
    price_table: [
      { tier: '1 MP', max_pixels: 1024 * 1024, credits: 3 },
      { tier: '2 MP', max_pixels: 2 * 1024 * 1024, credits: 5 },
      { tier: '3 MP', max_pixels: 3 * 1024 * 1024, credits: 6 },
      { tier: '4 MP', max_pixels: 4 * 1024 * 1024, credits: 8 },
    ],
    default_size: '1024x1024',
    ...upstreamLimitsOf('flux-2-pro'),
  },
  // OpenAI's Images API (they serve once an `openai` channel exists: OPENAI_API_KEY or the channels API). Priced from
  // OpenAI's per-image prices by quality and size at 1 credit = US$0.001 (src/providers/openai/models.ts proposedPriceTable).
  ...OPENAI_IMAGE_MODELS.map((row) => {
    const price_table = proposedPriceTable(row);
    return {
      model: row.model,
      provider: 'openai',
      upstream_model: row.model,
      credits_per_image: Math.max(...price_table.map((r) => r.credits)),
      price_table,
      default_size: '1024x1024',
      ...upstreamLimitsOf(row.model),
    };
  }),
  // Google's Gemini image models (they serve once a `gemini` channel exists: GEMINI_API_KEY or the channels API).
  // Credits at the catalog's scale (about US$0.01 each, rounded up) of Google's per-image prices by size tier:
  // 2.5 Flash Image $0.039; 3 Pro Image $0.134 at 1K and 2K, $0.24 at 4K; 3.1 Flash Image $0.067 / $0.101 / $0.151.
  { model: 'gemini-2.5-flash-image', provider: 'google', upstream_model: 'gemini-2.5-flash-image', credits_per_image: 4, default_size: '1024x1024', ...upstreamLimitsOf('gemini-2.5-flash-image') },
  { model: 'gemini-3-pro-image', provider: 'google', upstream_model: 'gemini-3-pro-image', credits_per_image: 24, price_table: tiers(['1K', 14, 1200 * 896], ['2K', 14, 2400 * 1792], ['4K', 24]), default_size: '1024x1024', ...upstreamLimitsOf('gemini-3-pro-image') },
  { model: 'gemini-3.1-flash-image', provider: 'google', upstream_model: 'gemini-3.1-flash-image', credits_per_image: 16, price_table: tiers(['1K', 7, 384 * 3072], ['2K', 11, 768 * 6144], ['4K', 16]), default_size: '1024x1024', ...upstreamLimitsOf('gemini-3.1-flash-image') },
];

function options(value: unknown, where: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error(`${where}: "upstream_options" must be an object`);
  return value as Record<string, unknown>;
}

function sizeBounds(value: unknown, where: string): SizeBounds {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error(`${where}: "size_bounds" must be an object`);
  const v = value as Record<string, unknown>;
  const positive = (field: string, required: boolean): number | undefined => {
    const n = v[field];
    if (n === undefined && !required) return undefined;
    if (typeof n !== 'number' || !(n > 0)) throw new Error(`${where}: "size_bounds.${field}" must be a number > 0`);
    return n;
  };
  const bounds: SizeBounds = {
    min_pixels: positive('min_pixels', true) as number,
    max_pixels: positive('max_pixels', true) as number,
    min_ratio: positive('min_ratio', true) as number,
    max_ratio: positive('max_ratio', true) as number,
  };
  const minSide = positive('min_side', false);
  const maxSide = positive('max_side', false);
  if (bounds.min_pixels > bounds.max_pixels || bounds.min_ratio > bounds.max_ratio) throw new Error(`${where}: "size_bounds" has a minimum above its maximum`);
  const exclusive = v.max_ratio_exclusive;
  if (exclusive !== undefined && exclusive !== true && exclusive !== false) throw new Error(`${where}: "size_bounds.max_ratio_exclusive" must be true or false`);
  const multiple = positive('side_multiple', false);
  if (multiple !== undefined && !Number.isInteger(multiple)) throw new Error(`${where}: "size_bounds.side_multiple" must be an integer`);
  const allowed = v.allowed_sizes;
  if (allowed !== undefined && (!Array.isArray(allowed) || allowed.length === 0 || allowed.some((size) => typeof size !== 'string' || !/^[1-9][0-9]*x[1-9][0-9]*$/.test(size)))) {
    throw new Error(`${where}: "size_bounds.allowed_sizes" must be a non-empty array of sizes like 1024x1024`);
  }
  return {
    ...bounds,
    ...(exclusive === true ? { max_ratio_exclusive: true } : {}),
    ...(minSide === undefined ? {} : { min_side: minSide }),
    ...(maxSide === undefined ? {} : { max_side: maxSide }),
    ...(allowed === undefined ? {} : { allowed_sizes: allowed as string[] }),
    ...(multiple === undefined ? {} : { side_multiple: multiple }),
  };
}

/** A catalog entry as written in MODEL_CATALOG: what `parseCatalog` derives from the upstream table left out. */
function writtenForm(entry: CatalogModel): Record<string, unknown> {
  const { size_bounds: _bounds, input_limits: _inputs, ...written } = entry;
  const derived = upstreamLimitsOf(entry.upstream_model);
  return {
    ...written,
    // Bounds an entry set itself (not the upstream table's) stay with it.
    ...(entry.size_bounds && entry.size_bounds !== derived.size_bounds ? { size_bounds: entry.size_bounds } : {}),
    ...(entry.input_limits && entry.input_limits !== derived.input_limits ? { input_limits: entry.input_limits } : {}),
  };
}

/**
 * MODEL_CATALOG's additive form, `{"models": [...], "remove": ["model", ...]}`: the built-in catalog
 * with each entry of `models` merged over the built-in entry of the same name (the fields it gives
 * replace those; a new name is a new model, whole) and the `remove`d models left out. The array form
 * (`parseCatalog`) replaces the built-in catalog instead.
 */
export function extendCatalog(raw: unknown, base: readonly CatalogModel[] = DEFAULT_CATALOG): CatalogModel[] {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new Error('must be a JSON array of models (replaces the built-in catalog) or an object {"models": [...], "remove": [...]} (changes it)');
  const { models = [], remove = [], ...unknown } = raw as Record<string, unknown>;
  const extra = Object.keys(unknown);
  if (extra.length > 0) throw new Error(`unknown field ${extra.map((f) => `"${f}"`).join(', ')}; the object form takes "models" and "remove"`);
  if (!Array.isArray(models)) throw new Error('"models" must be an array of models');
  if (!Array.isArray(remove) || remove.some((name) => typeof name !== 'string')) throw new Error('"remove" must be an array of model names');
  const merged = new Map(base.map((entry) => [entry.model, writtenForm(entry)]));
  for (const name of remove as string[]) {
    if (!merged.delete(name)) throw new Error(`"remove" names ${name}, which is not in the built-in catalog (${base.map((e) => e.model).join(', ')})`);
  }
  for (const [index, entry] of models.entries()) {
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) throw new Error(`models[${index}] is not an object`);
    const name = (entry as Record<string, unknown>).model;
    if (typeof name !== 'string' || name.length === 0) throw new Error(`models[${index}]: "model" must be a non-empty string`);
    if ((remove as string[]).includes(name)) throw new Error(`models[${index}]: ${name} is also in "remove"`);
    const over = merged.get(name);
    // A changed upstream model brings its own table's bounds unless the entry sets them.
    const kept = over && 'upstream_model' in entry ? { ...over, size_bounds: undefined, input_limits: undefined } : over;
    merged.set(name, { ...kept, ...entry });
  }
  const entries = [...merged.values()].map((entry) => Object.fromEntries(Object.entries(entry).filter(([, value]) => value !== undefined)));
  return parseCatalog(entries);
}

/** Parses and checks a catalog (from MODEL_CATALOG JSON); throws a readable message when it is wrong. */
export function parseCatalog(raw: unknown): CatalogModel[] {
  if (!Array.isArray(raw) || raw.length === 0) throw new Error('must be a non-empty JSON array of models');
  const seen = new Set<string>();
  return raw.map((entry: unknown, index) => {
    const where = `entry ${index}`;
    if (typeof entry !== 'object' || entry === null) throw new Error(`${where} is not an object`);
    const e = entry as Record<string, unknown>;
    const text = (field: string): string => {
      const value = e[field];
      if (typeof value !== 'string' || value.length === 0) throw new Error(`${where}: "${field}" must be a non-empty string`);
      return value;
    };
    const model = text('model');
    if (seen.has(model)) throw new Error(`${where}: model "${model}" appears twice`);
    seen.add(model);
    const credits = e.credits_per_image;
    if (typeof credits !== 'number' || !Number.isInteger(credits) || credits < 0) {
      throw new Error(`${where}: "credits_per_image" must be an integer >= 0`);
    }
    const defaultSize = e.default_size === undefined ? '1024x1024' : text('default_size');
    if (!/^[1-9][0-9]{1,3}x[1-9][0-9]{1,3}$/.test(defaultSize)) throw new Error(`${where}: "default_size" must look like 1024x1024`);
    const upstreamModel = e.upstream_model === undefined ? model : text('upstream_model');
    const family = e.upstream_family === undefined ? undefined : text('upstream_family');
    if (family !== undefined && !UPSTREAM_FAMILIES.includes(family)) throw new Error(`${where}: "upstream_family" ${family} is not a known model family (known: ${UPSTREAM_FAMILIES.join(', ')})`);
    const bounds = e.size_bounds === undefined ? boundsOf(upstreamModel, family) : { size_bounds: sizeBounds(e.size_bounds, where) };
    // `null` says the model takes no input images, whatever its upstream's table entry says.
    const inputs = e.input_limits === undefined ? inputsOf(upstreamModel, family) : e.input_limits === null ? {} : { input_limits: inputLimits(e.input_limits, where) };
    const [width, height] = defaultSize.split('x').map(Number) as [number, number];
    const outside = bounds.size_bounds && sizeOutOfBounds(width, height, bounds.size_bounds);
    if (outside) throw new Error(`${where}: "default_size" ${defaultSize} is outside the model's size bounds (${outside})`);
    return {
      model,
      provider: text('provider'),
      upstream_model: upstreamModel,
      credits_per_image: credits,
      default_size: defaultSize,
      ...(e.transport === undefined ? {} : { transport: text('transport') }),
      ...(family === undefined ? {} : { upstream_family: family }),
      ...(e.upstream_options === undefined ? {} : { upstream_options: options(e.upstream_options, where) }),
      ...(e.price_table === undefined ? {} : { price_table: parsePriceTable(e.price_table, where) }),
      ...bounds,
      ...inputs,
    };
  });
}
