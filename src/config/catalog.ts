import { type InputImageLimits, type SizeBounds, sizeOutOfBounds, UPSTREAM_FAMILIES, upstreamModelSpec } from '../providers/upstream-models';
import { inputLimits } from './input-limits';
import { type PriceRow, parsePriceTable } from './price-table';
import { FORMATS } from '../providers/formats';
import { DEFAULT_CONVERSION, priceEntry } from '../pricing/catalog-prices';
import { type CreditConversion, parsePrice, type Price } from '../pricing/price';

export type { InputImageLimits, SizeBounds };

/** One model a client may ask for, and how the gateway serves and prices it. */
export interface CatalogModel {
  /** The id clients send as `model`. */
  model: string;
  /** Provider that serves it; a key must allow this provider. */
  provider: string;
  /** The model id the provider's upstream understands. */
  upstream_model: string;
  /** Credits per image where no `price_table` row fits; derived from `price` for a model priced in money. */
  credits_per_image: number;
  /** Credits per image by size and quality (price-table.ts); `credits_per_image` where no row fits. */
  price_table?: PriceRow[];
  /** The upstream's price in its own money and meters, with its source (src/pricing/price.ts). */
  price?: Price;
  /** This model's markup over `price`, instead of PRICE_MARKUP. */
  markup?: number;
  /** What keys are charged, in credits (src/pricing/catalog-prices.ts priceEntry): derived, never written. */
  credit_price?: Price;
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
  /**
   * Other catalog models to continue on, in order, when every channel of this one fails on the
   * provider's side (src/channels/model-fallbacks.ts); each brings its own fallbacks after it (fallbackChain).
   */
  fallbacks?: string[];
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

/**
 * The built-in catalog: each wire format's own rows (its descriptor's `catalog`, in registry order),
 * with the size bounds and input limits its model table documents.
 */
export const DEFAULT_CATALOG: CatalogModel[] = FORMATS.flatMap((descriptor) =>
  (descriptor.catalog ?? []).map((row) =>
    priceEntry(
      {
        ...row,
        credits_per_image: row.credits_per_image ?? 0,
        ...(row.price_table ? { price_table: row.price_table.map((r) => ({ ...r })) } : {}),
        ...upstreamLimitsOf(row.upstream_model),
      },
      DEFAULT_CONVERSION,
    ),
  ),
);

/** The catalog with every model's credits worked out at `conversion` (CREDITS_PER_USD, PRICE_MARKUP). */
export function priceCatalog(models: readonly CatalogModel[], conversion: CreditConversion): CatalogModel[] {
  return models.map((entry) => priceEntry(entry, conversion));
}

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
  if (exclusive !== undefined && exclusive !== true && exclusive !== false)
    throw new Error(`${where}: "size_bounds.max_ratio_exclusive" must be true or false`);
  const multiple = positive('side_multiple', false);
  if (multiple !== undefined && !Number.isInteger(multiple)) throw new Error(`${where}: "size_bounds.side_multiple" must be an integer`);
  const allowed = v.allowed_sizes;
  if (
    allowed !== undefined &&
    (!Array.isArray(allowed) || allowed.length === 0 || allowed.some((size) => typeof size !== 'string' || !/^[1-9][0-9]*x[1-9][0-9]*$/.test(size)))
  ) {
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

/**
 * A catalog entry as MODEL_CATALOG takes it: without the credits derived from a money price (a model
 * is priced by `price` or by `credits_per_image`, never both), so that it parses back to itself.
 */
export function asWritten(entry: CatalogModel): Partial<CatalogModel> {
  const { credit_price: _credits, ...all } = entry;
  const { credits_per_image: _perImage, price_table: _table, ...priced } = all;
  return entry.price ? priced : all;
}

/** A catalog entry as written in MODEL_CATALOG: what `parseCatalog` derives from the upstream table left out. */
function writtenForm(entry: CatalogModel): Record<string, unknown> {
  const { size_bounds: _bounds, input_limits: _inputs, ...written } = asWritten(entry);
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
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw new Error('must be a JSON array of models (replaces the built-in catalog) or an object {"models": [...], "remove": [...]} (changes it)');
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
    const bounded = over && 'upstream_model' in entry ? { ...over, size_bounds: undefined, input_limits: undefined } : over;
    // Credits given for a model priced in money replace its price.
    const kept =
      bounded && ('credits_per_image' in entry || 'price_table' in entry) && !('price' in entry)
        ? { ...bounded, price: undefined, markup: undefined }
        : bounded;
    merged.set(name, { ...kept, ...entry });
  }
  const entries = [...merged.values()].map((entry) => Object.fromEntries(Object.entries(entry).filter(([, value]) => value !== undefined)));
  return parseCatalog(entries);
}

function fallbackNames(value: unknown, where: string, model: string): string[] {
  if (!Array.isArray(value) || value.some((name) => typeof name !== 'string' || name.length === 0))
    throw new Error(`${where}: "fallbacks" must be an array of model names`);
  const names = value as string[];
  if (names.includes(model)) throw new Error(`${where}: "fallbacks" of ${model} names ${model} itself`);
  const twice = names.find((name, i) => names.indexOf(name) !== i);
  if (twice !== undefined) throw new Error(`${where}: "fallbacks" of ${model} names ${twice} twice`);
  return names;
}

/** Every model a catalog's `fallbacks` name is in it, and no chain of fallbacks comes back to where it started. */
function checkFallbacks(models: readonly CatalogModel[]): void {
  const byName = new Map(models.map((entry) => [entry.model, entry]));
  for (const entry of models) {
    const unknown = entry.fallbacks?.find((name) => !byName.has(name));
    if (unknown !== undefined) throw new Error(`model ${entry.model}: "fallbacks" names ${unknown}, which is not in the catalog`);
  }
  // Depth-first, with the path walked so far: a name met again on its own path is a cycle.
  const done = new Set<string>();
  const visit = (name: string, path: string[]): void => {
    if (path.includes(name)) throw new Error(`"fallbacks" make a cycle: ${[...path.slice(path.indexOf(name)), name].join(' -> ')}`);
    if (done.has(name)) return;
    for (const next of byName.get(name)?.fallbacks ?? []) visit(next, [...path, name]);
    done.add(name);
  };
  for (const entry of models) visit(entry.model, []);
}

/**
 * The models a request for `entry` may continue on, in order: its `fallbacks`, each followed by its
 * own chain (depth-first), every model once. The catalog has no cycles (checkFallbacks).
 */
export function fallbackChain(entry: CatalogModel, catalog: ReadonlyMap<string, CatalogModel>): CatalogModel[] {
  const chain: CatalogModel[] = [];
  const seen = new Set([entry.model]);
  const walk = (from: CatalogModel): void => {
    for (const name of from.fallbacks ?? []) {
      const next = catalog.get(name);
      if (!next || seen.has(name)) continue;
      seen.add(name);
      chain.push(next);
      walk(next);
    }
  };
  walk(entry);
  return chain;
}

/** Parses and checks a catalog (from MODEL_CATALOG JSON); throws a readable message when it is wrong. */
export function parseCatalog(raw: unknown): CatalogModel[] {
  const models = parseModels(raw);
  checkFallbacks(models);
  return models;
}

function parseModels(raw: unknown): CatalogModel[] {
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
    const price = e.price === undefined ? undefined : parsePrice(e.price, where);
    const credits = e.credits_per_image;
    if (price && (credits !== undefined || e.price_table !== undefined))
      throw new Error(`${where}: a model is priced by "price" or by "credits_per_image" (and "price_table"), not both`);
    if (!price && (typeof credits !== 'number' || !Number.isInteger(credits) || credits < 0)) {
      throw new Error(`${where}: "credits_per_image" must be an integer >= 0 (or give "price")`);
    }
    const markup = e.markup;
    if (markup !== undefined && (typeof markup !== 'number' || !Number.isFinite(markup) || markup <= 0))
      throw new Error(`${where}: "markup" must be a number > 0 (1.2 adds 20%)`);
    const defaultSize = e.default_size === undefined ? '1024x1024' : text('default_size');
    if (!/^[1-9][0-9]{1,3}x[1-9][0-9]{1,3}$/.test(defaultSize)) throw new Error(`${where}: "default_size" must look like 1024x1024`);
    const upstreamModel = e.upstream_model === undefined ? model : text('upstream_model');
    const family = e.upstream_family === undefined ? undefined : text('upstream_family');
    if (family !== undefined && !UPSTREAM_FAMILIES.includes(family))
      throw new Error(`${where}: "upstream_family" ${family} is not a known model family (known: ${UPSTREAM_FAMILIES.join(', ')})`);
    const bounds = e.size_bounds === undefined ? boundsOf(upstreamModel, family) : { size_bounds: sizeBounds(e.size_bounds, where) };
    // `null` says the model takes no input images, whatever its upstream's table entry says.
    const inputs =
      e.input_limits === undefined ? inputsOf(upstreamModel, family) : e.input_limits === null ? {} : { input_limits: inputLimits(e.input_limits, where) };
    const [width, height] = defaultSize.split('x').map(Number) as [number, number];
    const outside = bounds.size_bounds && sizeOutOfBounds(width, height, bounds.size_bounds);
    if (outside) throw new Error(`${where}: "default_size" ${defaultSize} is outside the model's size bounds (${outside})`);
    const parsed: CatalogModel = {
      model,
      provider: text('provider'),
      upstream_model: upstreamModel,
      credits_per_image: price ? 0 : (credits as number),
      default_size: defaultSize,
      ...(price ? { price } : {}),
      ...(markup === undefined ? {} : { markup: markup as number }),
      ...(e.transport === undefined ? {} : { transport: text('transport') }),
      ...(family === undefined ? {} : { upstream_family: family }),
      ...(e.upstream_options === undefined ? {} : { upstream_options: options(e.upstream_options, where) }),
      ...(e.price_table === undefined ? {} : { price_table: parsePriceTable(e.price_table, where) }),
      ...bounds,
      ...inputs,
      ...(e.fallbacks === undefined ? {} : { fallbacks: fallbackNames(e.fallbacks, where, model) }),
    };
    return priceEntry(parsed, DEFAULT_CONVERSION);
  });
}
