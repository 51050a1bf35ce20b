import type { components } from '../../generated/gateway';

/**
 * A model's price as a sum of metered terms (docs/operators/pricing.md). Each term is a rate times a
 * quantity the gateway measures: images, output or input megapixels, seconds of video, tokens the
 * upstream reports, or calls. The built-in catalog writes each upstream's price in its own money
 * (`currency: "USD"`, with its source); one setting (CREDITS_PER_USD) and an optional markup turn it
 * into credits, the one unit keys and projects are charged in. A MODEL_CATALOG row priced in credits
 * (`credits_per_image`, `price_table`) is a price in credits with image terms only.
 */

export const METERS = [
  'image',
  'output_megapixel',
  'input_megapixel',
  'video_second',
  'input_token',
  'output_token',
  'call',
] as const satisfies readonly components['schemas']['PriceTerm']['meter'][];
export type Meter = PriceTerm['meter'];

/** The qualities a price term may name (OpenAI's `quality`); `auto` is priced as no quality. */
export const PRICED_QUALITIES = ['low', 'medium', 'high', 'standard', 'hd'] as const satisfies readonly NonNullable<PriceTerm['quality']>[];
export type PricedQuality = NonNullable<PriceTerm['quality']>;

/** Pixels in one megapixel unless a term says otherwise (fal's and most upstreams' decimal megapixel). */
export const DECIMAL_MEGAPIXEL = 1_000_000;

/** A term of a price: the contract's PriceTerm (openapi/shared.yaml). */
export type PriceTerm = components['schemas']['PriceTerm'];

/** A price: the contract's Price (openapi/shared.yaml), with its `currency`, terms, minimum and source. */
export type Price = components['schemas']['Price'];

/** How money becomes credits: `CREDITS_PER_USD` times the markup (the model's, else the catalog's). */
export interface CreditConversion {
  creditsPerUsd: number;
  markup: number;
}

/**
 * A price in credits: the terms' rates multiplied out. A price per image (or per call) is rounded up
 * to whole credits, as every per-image price always was, so a table of them reads as what `n` images
 * cost; rates per megapixel, second or token stay exact and their sum is rounded up once
 * (meters.ts wholeCredits). Credits prices (MODEL_CATALOG's own) are taken as they are.
 */
export function inCredits(price: Price, conversion: CreditConversion, modelMarkup?: number): Price {
  if (price.currency === 'credits') return price;
  const factor = conversion.creditsPerUsd * (modelMarkup ?? conversion.markup);
  const scale = (money: number) => roundRate(money * factor);
  const whole = (credits: number) => Math.ceil(credits - 1e-9);
  return {
    currency: 'credits',
    terms: price.terms.map((term) => ({ ...term, rate: term.meter === 'image' || term.meter === 'call' ? whole(scale(term.rate)) : scale(term.rate) })),
    ...(price.minimum_per_call === undefined ? {} : { minimum_per_call: whole(scale(price.minimum_per_call)) }),
    ...(price.source === undefined ? {} : { source: price.source }),
  };
}

/** Rates keep 9 significant digits: floating-point dust (0.025 × 100 = 2.5000000000000004) never rounds a charge up. */
function roundRate(value: number): number {
  return Number(value.toPrecision(9));
}

/** A price in credits from MODEL_CATALOG's per-image form: its table's rows, then `credits_per_image` for any image. */
export function perImagePrice(creditsPerImage: number, table: readonly PriceTerm[] = []): Price {
  return { currency: 'credits', terms: [...table, { meter: 'image', rate: creditsPerImage }] };
}

/** Parses and checks a `price` of MODEL_CATALOG; throws a readable message when it is wrong. */
export function parsePrice(value: unknown, where: string): Price {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new Error(`${where}: "price" must be an object {currency, terms, minimum_per_call?, source?}`);
  const { currency, terms, minimum_per_call, source, ...rest } = value as Record<string, unknown>;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) throw new Error(`${where}: price: unknown field "${unknown[0]}" (a price takes currency, terms, minimum_per_call, source)`);
  if (currency !== 'USD' && currency !== 'credits') throw new Error(`${where}: price.currency must be "USD" or "credits"`);
  if (!Array.isArray(terms) || terms.length === 0) throw new Error(`${where}: price.terms must be a non-empty array`);
  if (minimum_per_call !== undefined && !nonNegative(minimum_per_call)) throw new Error(`${where}: price.minimum_per_call must be a number >= 0`);
  if (source !== undefined && (typeof source !== 'string' || source.length === 0)) throw new Error(`${where}: price.source must be a non-empty string`);
  return {
    currency,
    terms: terms.map((term: unknown, index) => parseTerm(term, `${where}: price.terms[${index}]`)),
    ...(minimum_per_call === undefined ? {} : { minimum_per_call: minimum_per_call as number }),
    ...(source === undefined ? {} : { source: source as string }),
  };
}

function nonNegative(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0;
}

function parseTerm(raw: unknown, at: string): PriceTerm {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new Error(`${at} is not an object`);
  const { meter, rate, quality, max_pixels, megapixel, included_megapixels, resolution, audio, tier, ...rest } = raw as Record<string, unknown>;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) throw new Error(`${at}: unknown field "${unknown[0]}"`);
  if (typeof meter !== 'string' || !(METERS as readonly string[]).includes(meter)) throw new Error(`${at}: "meter" must be one of ${METERS.join(', ')}`);
  if (!nonNegative(rate)) throw new Error(`${at}: "rate" must be a number >= 0`);
  const positiveInteger = (field: string, v: unknown) => {
    if (v !== undefined && (typeof v !== 'number' || !Number.isInteger(v) || v < 1)) throw new Error(`${at}: "${field}" must be an integer >= 1`);
  };
  positiveInteger('max_pixels', max_pixels);
  positiveInteger('megapixel', megapixel);
  if (included_megapixels !== undefined && !nonNegative(included_megapixels)) throw new Error(`${at}: "included_megapixels" must be a number >= 0`);
  if (quality !== undefined && !(PRICED_QUALITIES as readonly unknown[]).includes(quality))
    throw new Error(`${at}: "quality" must be one of ${PRICED_QUALITIES.join(', ')}`);
  if (resolution !== undefined && (typeof resolution !== 'string' || resolution.length === 0))
    throw new Error(`${at}: "resolution" must be a label such as 720p`);
  if (audio !== undefined && typeof audio !== 'boolean') throw new Error(`${at}: "audio" must be true or false`);
  if (tier !== undefined && (typeof tier !== 'string' || tier.length === 0 || tier.length > 20))
    throw new Error(`${at}: "tier" must be a short label such as "2K"`);
  const onlyFor = (field: string, present: boolean, meters: readonly Meter[]) => {
    if (present && !meters.includes(meter as Meter)) throw new Error(`${at}: "${field}" applies to ${meters.join(', ')} terms only`);
  };
  onlyFor('max_pixels', max_pixels !== undefined, ['image']);
  onlyFor('megapixel', megapixel !== undefined, ['output_megapixel', 'input_megapixel']);
  onlyFor('included_megapixels', included_megapixels !== undefined, ['output_megapixel', 'input_megapixel']);
  onlyFor('resolution', resolution !== undefined, ['video_second']);
  onlyFor('audio', audio !== undefined, ['video_second']);
  return {
    meter: meter as Meter,
    rate,
    ...(quality === undefined ? {} : { quality: quality as PricedQuality }),
    ...(max_pixels === undefined ? {} : { max_pixels: max_pixels as number }),
    ...(megapixel === undefined ? {} : { megapixel: megapixel as number }),
    ...(included_megapixels === undefined ? {} : { included_megapixels: included_megapixels as number }),
    ...(resolution === undefined ? {} : { resolution: resolution as string }),
    ...(audio === undefined ? {} : { audio: audio as boolean }),
    ...(tier === undefined ? {} : { tier: tier as string }),
  };
}
