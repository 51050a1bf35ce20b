import type { GenerationsTable } from '../db/schema';
import { heldFor } from '../generation/charges';
import { callsOf, onModel, type StoredGenerationRequest, storedRequestOf } from '../generation/durable';
import { costOf, type Pixels } from '../pricing/meters';
import type { Price } from '../pricing/price';

/**
 * What the upstream is estimated to have billed for a generation, in US dollars, beside the credits
 * it charged (docs/operators/pricing.md, "Reading margin"): the quantities it billed at the model's
 * money `price` (the catalog's, with its source), never its price in credits. A model priced in
 * credits only (a MODEL_CATALOG row with `credits_per_image`, the Jimeng models) has no such price:
 * its cost is unknown (null), never 0, so that it cannot pass for a free upstream.
 */

/** The model's upstream price in US dollars, if it has one. */
function moneyPriceOf(stage: StoredGenerationRequest): Price | undefined {
  const price = stage.entry.price;
  return price?.currency === 'USD' ? price : undefined;
}

/** Input images the upstream bills by their megapixels (as charges.ts prices them). */
function inputPixels(stage: StoredGenerationRequest): Pixels[] {
  return (stage.inputs?.images ?? []).map(({ width, height }) => ({ width, height }));
}

/** Dollars kept to the micro-dollar: floating-point dust (0.025 × 5 = 0.12500000000000003) never shows. */
export function dollars(value: number): number {
  return Math.round(value * 1_000_000) / 1_000_000;
}

/**
 * A success: the delivered quantities (at most `n` images at their own pixels, the input images, the
 * tokens the upstream reported) at the delivering model's money price, plus the images the upstream
 * billed and did not deliver (`unbilledImages`, charges.ts unbilledOf) at its price per image.
 */
export function deliveredCostUsd(
  stage: StoredGenerationRequest,
  delivered: readonly (Pixels & { usage?: { inputTokens: number; outputTokens: number } | undefined })[],
  unbilledImages = 0,
): number | null {
  const price = moneyPriceOf(stage);
  if (!price) return null;
  const reported = delivered.filter((image) => image.usage !== undefined);
  const cost = costOf(price, {
    images: delivered.slice(0, stage.request.n).map(({ width, height }) => ({ width, height })),
    quality: stage.request.quality,
    inputImages: inputPixels(stage),
    ...(reported.length > 0
      ? {
          tokens: {
            input: reported.reduce((sum, image) => sum + (image.usage?.inputTokens ?? 0), 0),
            output: reported.reduce((sum, image) => sum + (image.usage?.outputTokens ?? 0), 0),
          },
        }
      : {}),
    calls: callsOf(stage),
  });
  return dollars(cost + (unbilledImages > 0 ? (perImageCostUsd(stage, price) ?? 0) * unbilledImages : 0));
}

/** The request's price per image on the model of `stage`: the cost of all it asked for (sizes, quality, inputs, calls) over `n`. */
function perImageCostUsd(stage: StoredGenerationRequest, price: Price): number | null {
  const { n, width, height, quality } = stage.request;
  if (n <= 0) return null;
  const all = costOf(price, {
    images: Array.from({ length: n }, () => ({ width, height })),
    quality,
    inputImages: inputPixels(stage),
    calls: callsOf(stage),
  });
  return all / n;
}

/** `images` the upstream billed for a generation that delivered none of them, at the model's price per image. */
export function imagesCostUsd(stage: StoredGenerationRequest, images: number): number | null {
  const price = moneyPriceOf(stage);
  if (!price) return null;
  if (images <= 0) return 0;
  return dollars((perImageCostUsd(stage, price) ?? 0) * images);
}

/**
 * A generation that ended without delivering (failed, canceled, disconnected), from its row: the
 * images whose credits it kept (a cancel's or a disconnect's calls sent: the kept credits' share of
 * what the model holds) and the images booked as the operator's loss, at the price per image of the
 * model it last ran on. Null when that model has no money price or the row stores no request.
 */
export function endedCostUsd(
  row: Pick<GenerationsTable, 'id' | 'request' | 'model' | 'credits' | 'images'>,
  keptCredits: number,
  unbilledImages: number,
): number | null {
  if (row.request === null) return null;
  const stored = storedRequestOf(row);
  const stage = onModel(stored, row.model);
  const held = heldFor(stage, { credits: row.credits, images: row.images });
  const kept = held.credits > 0 ? Math.min(held.images, Math.round((keptCredits * held.images) / held.credits)) : 0;
  return imagesCostUsd(stage, kept + unbilledImages);
}

/** Credits per US dollar and the margin of a group: credits of costed generations in dollars less their upstream cost. */
export function marginUsd(costedCredits: number, upstreamCostUsd: number | null, creditsPerUsd: number): number | null {
  if (upstreamCostUsd === null) return null;
  return dollars(costedCredits / creditsPerUsd - upstreamCostUsd);
}
