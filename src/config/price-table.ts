import type { components } from '../../generated/gateway';
import { ApiError } from '../errors/api-error';

/**
 * One row of a model's price table: credits per image for outputs up to `max_pixels` (width × height)
 * and, when it names one, of that `quality`. `tier` labels the row for people (a model's 1K / 2K / 4K).
 */
export type PriceRow = components['schemas']['PriceTable'][number];
type PricedQuality = NonNullable<PriceRow['quality']>;

/** What prices one image: its size and the quality the request asked for. */
export interface PricedImage {
  width: number;
  height: number;
  quality?: string;
}

/**
 * The qualities a request may name (OpenAI's `quality`). `auto` lets the upstream choose, so it is
 * priced as no quality at all.
 */
export const QUALITIES = ['low', 'medium', 'high', 'standard', 'hd', 'auto'] as const;

/**
 * Credits per image of one request: the first row of the model's table that fits (its quality, when
 * the row names one, is the request's; its `max_pixels`, when it has one, at least the image's); the
 * model's `credits_per_image` when none fits or it has no table. A request without a quality (or with
 * `auto`) fits only rows without one. Every image of a request has the same price, so a generation's
 * credits are `n` × this, and what it keeps of them is proportional to the images it delivered.
 */
export function creditsPerImage(entry: { credits_per_image: number; price_table?: readonly PriceRow[] }, image: PricedImage): number {
  const quality = image.quality === 'auto' ? undefined : image.quality;
  const pixels = image.width * image.height;
  const row = entry.price_table?.find((r) => (r.quality as string | undefined) === quality && (r.max_pixels === undefined || pixels <= r.max_pixels));
  return row?.credits ?? entry.credits_per_image;
}

/**
 * 400 `invalid_request` (param `quality`) for a quality the model's table does not price: a request
 * is never charged at a price it did not ask for. A model whose table names no quality takes any (and
 * ignores it, as OpenAI-shaped clients send one by habit).
 */
export function checkQuality(entry: { model: string; price_table?: readonly PriceRow[] }, quality: string | undefined): void {
  const refusal = qualityRefusal(entry, quality);
  if (refusal) throw new ApiError('invalid_request', refusal, { param: 'quality' });
}

/** Why `entry` does not take `quality` (checkQuality's rule), or undefined when it does. */
export function qualityRefusal(entry: { model: string; price_table?: readonly PriceRow[] }, quality: string | undefined): string | undefined {
  if (quality === undefined || quality === 'auto') return undefined;
  const priced: string[] = [...new Set((entry.price_table ?? []).flatMap((row) => (row.quality === undefined ? [] : [row.quality])))];
  return priced.length > 0 && !priced.includes(quality)
    ? `Quality ${quality} is not available on model ${entry.model}; it takes ${priced.join(', ')} (or none).`
    : undefined;
}

/** Parses and checks a `price_table` of MODEL_CATALOG; throws a readable message when it is wrong. */
export function parsePriceTable(value: unknown, where: string): PriceRow[] {
  if (!Array.isArray(value) || value.length === 0)
    throw new Error(`${where}: "price_table" must be a non-empty array of {credits, max_pixels?, quality?, tier?}`);
  return value.map((raw: unknown, index) => {
    const at = `${where}: price_table[${index}]`;
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new Error(`${at} is not an object`);
    const { credits, max_pixels, quality, tier, ...rest } = raw as Record<string, unknown>;
    const unknown = Object.keys(rest);
    if (unknown.length > 0) throw new Error(`${at}: unknown field "${unknown[0]}" (a row takes credits, max_pixels, quality, tier)`);
    if (typeof credits !== 'number' || !Number.isInteger(credits) || credits < 0) throw new Error(`${at}: "credits" must be an integer >= 0`);
    if (max_pixels !== undefined && (typeof max_pixels !== 'number' || !Number.isInteger(max_pixels) || max_pixels < 1))
      throw new Error(`${at}: "max_pixels" must be an integer >= 1`);
    if (quality !== undefined && (typeof quality !== 'string' || !(QUALITIES as readonly string[]).includes(quality) || quality === 'auto')) {
      throw new Error(`${at}: "quality" must be one of ${QUALITIES.filter((q) => q !== 'auto').join(', ')}`);
    }
    if (tier !== undefined && (typeof tier !== 'string' || tier.length === 0 || tier.length > 20))
      throw new Error(`${at}: "tier" must be a short label such as "2K"`);
    return {
      credits,
      ...(max_pixels === undefined ? {} : { max_pixels: max_pixels as number }),
      ...(quality === undefined ? {} : { quality: quality as PricedQuality }),
      ...(tier === undefined ? {} : { tier: tier as string }),
    };
  });
}
