import type { PriceRow } from '../config/price-table';
import { costOf, wholeCredits } from './meters';
import { type CreditConversion, inCredits, perImagePrice, type Price, type PriceTerm, PRICED_QUALITIES } from './price';

/**
 * One credit is one US cent unless CREDITS_PER_USD says otherwise: the scale the catalog's
 * non-OpenAI models were priced at before their prices were written in money.
 */
export const DEFAULT_CREDITS_PER_USD = 100;
export const DEFAULT_CONVERSION: CreditConversion = { creditsPerUsd: DEFAULT_CREDITS_PER_USD, markup: 1 };

/** The pricing fields of a catalog model (config/catalog.ts CatalogModel). */
export interface PricedEntry {
  model: string;
  credits_per_image: number;
  price_table?: PriceRow[];
  default_size: string;
  /** The upstream's price in its own money, with its source; absent for models priced in credits only. */
  price?: Price;
  /** This model's markup over its money price, instead of the catalog's (PRICE_MARKUP). */
  markup?: number;
  /** What keys are charged for a model priced in money: `price` in credits (priceEntry). */
  credit_price?: Price;
}

/** The price table rows as image terms in credits. */
function tableTerms(table: readonly PriceRow[] | undefined): PriceTerm[] {
  return (table ?? []).map((row) => ({
    meter: 'image',
    rate: row.credits,
    ...(row.max_pixels === undefined ? {} : { max_pixels: row.max_pixels }),
    ...(row.quality === undefined ? {} : { quality: row.quality }),
    ...(row.tier === undefined ? {} : { tier: row.tier }),
  }));
}

/** What a model charges keys, in credits: its money price converted, else its per-image credits and table. */
export function creditPriceOf(entry: PricedEntry): Price {
  return entry.credit_price ?? perImagePrice(entry.credits_per_image, tableTerms(entry.price_table));
}

/** Credits for one image of `size` at `quality` and nothing else (no inputs, one call). */
function creditsForOneImage(price: Price, size: string, quality?: string): number {
  const [width, height] = size.split('x').map(Number) as [number, number];
  return wholeCredits(costOf(price, { images: [{ width, height }], quality, calls: 1 }));
}

/**
 * A catalog entry with its prices in credits (a model priced in credits is as it is): for a model
 * priced in money, `credit_price`; `credits_per_image`, its image term for any image if it has one,
 * else one image at the default size at the dearest quality its price names; and, when its price is
 * a table of image terms by size or quality, `price_table` (those terms in credits), so that clients
 * reading the per-image fields see what they pay.
 */
export function priceEntry<T extends PricedEntry>(entry: T, conversion: CreditConversion): T {
  if (!entry.price) return entry;
  const credit_price = inCredits(entry.price, conversion, entry.markup);
  const imageTerms = credit_price.terms.filter((term) => term.meter === 'image');
  const last = imageTerms[imageTerms.length - 1];
  const anyImage = last && last.quality === undefined && last.max_pixels === undefined ? last : undefined;
  const qualities = PRICED_QUALITIES.filter((quality) => credit_price.terms.some((term) => term.quality === quality));
  const credits_per_image =
    anyImage?.rate ??
    Math.max(
      creditsForOneImage(credit_price, entry.default_size),
      ...qualities.map((quality) => creditsForOneImage(credit_price, entry.default_size, quality)),
    );
  const imageOnly = imageTerms.length === credit_price.terms.length && credit_price.minimum_per_call === undefined;
  const tiered = imageTerms.some((term) => term.max_pixels !== undefined || term.quality !== undefined);
  const price_table: PriceRow[] | undefined =
    imageOnly && tiered
      ? imageTerms.map((term) => ({
          ...(term.tier === undefined ? {} : { tier: term.tier }),
          ...(term.quality === undefined ? {} : { quality: term.quality }),
          ...(term.max_pixels === undefined ? {} : { max_pixels: term.max_pixels }),
          credits: term.rate,
        }))
      : undefined;
  const { price_table: _derived, ...rest } = entry;
  return { ...rest, credits_per_image, ...(price_table ? { price_table } : {}), credit_price } as T;
}
