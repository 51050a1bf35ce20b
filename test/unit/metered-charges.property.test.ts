import fc from 'fast-check';
import type { CatalogModel } from '../../src/config/catalog';
import { boundOf, deliveredCharge, heldFor, reservedCredits } from '../../src/generation/charges';
import { onModel, type StoredGenerationRequest } from '../../src/generation/durable';
import { DEFAULT_CONVERSION, priceEntry } from '../../src/pricing/catalog-prices';
import { costOf, wholeCredits } from '../../src/pricing/meters';
import type { Price, PriceTerm } from '../../src/pricing/price';

/**
 * docs/operators/pricing.md "Reserve the most, charge what happened", over random prices, sizes,
 * qualities, `n`, input images, partial and oversized deliveries, token reports and fallback chains:
 * the reservation bounds every model of the chain; a success is charged exactly the priced delivered
 * quantities when they fit what its model holds, else what it holds with the difference as overrun.
 */
const QUALITIES = [undefined, 'low', 'high'] as const;

const term = fc.oneof(
  fc.record({ meter: fc.constant('image' as const), rate: fc.integer({ min: 0, max: 500 }).map((c) => c / 100) }),
  fc.record({
    meter: fc.constant('image' as const),
    rate: fc.integer({ min: 0, max: 500 }).map((c) => c / 100),
    max_pixels: fc.integer({ min: 64 * 64, max: 4096 * 4096 }),
    quality: fc.constantFrom('low' as const, 'high' as const),
  }),
  fc.record({
    meter: fc.constantFrom('output_megapixel' as const, 'input_megapixel' as const),
    rate: fc.integer({ min: 0, max: 100 }).map((c) => c / 1000),
    megapixel: fc.constantFrom(1_000_000, 1_048_576),
    included_megapixels: fc.constantFrom(0, 1),
  }),
  fc.record({ meter: fc.constant('call' as const), rate: fc.integer({ min: 0, max: 10 }).map((c) => c / 100) }),
  fc.record({ meter: fc.constantFrom('input_token' as const, 'output_token' as const), rate: fc.integer({ min: 0, max: 4000 }).map((c) => c / 100) }),
);
const price: fc.Arbitrary<Price> = fc.record({
  currency: fc.constant('USD' as const),
  terms: fc.array(term, { minLength: 1, maxLength: 4 }) as fc.Arbitrary<PriceTerm[]>,
});
const side = fc.integer({ min: 16, max: 4096 });
const pixels = fc.record({ width: side, height: side });

function model(name: string, upstream: Price): CatalogModel {
  return priceEntry(
    { model: name, provider: 'selfhosted', upstream_model: name, credits_per_image: 0, default_size: '1024x1024', price: upstream },
    DEFAULT_CONVERSION,
  );
}

const request = fc.record({
  prices: fc.array(price, { minLength: 1, maxLength: 3 }),
  n: fc.integer({ min: 1, max: 4 }),
  size: pixels,
  quality: fc.constantFrom(...QUALITIES),
  inputs: fc.array(pixels, { maxLength: 3 }),
});

type Request = typeof request extends fc.Arbitrary<infer T> ? T : never;

function stored(r: Request): StoredGenerationRequest {
  const [first, ...rest] = r.prices.map((p, i) => model(`m${i}`, p));
  return {
    entry: first!,
    request: {
      prompt: 'p',
      upstreamModel: first!.upstream_model,
      n: r.n,
      width: r.size.width,
      height: r.size.height,
      responseFormat: 'url',
      ...(r.quality ? { quality: r.quality } : {}),
    },
    inputs: { delivery: 'inline', images: r.inputs.map((p, i) => ({ id: `img_${i}`, format: 'png', ...p })) },
    keep_base64: false,
    mark_sends: true,
    ...(rest.length > 0 ? { fallbacks: rest } : {}),
  };
}

describe('reserve the most, charge what happened (property)', () => {
  it('the reservation covers the dearest model of the chain; a delivery as asked on any model costs at most what that model holds', () => {
    fc.assert(
      fc.property(request, (r) => {
        const generation = stored(r);
        const reserved = reservedCredits(generation);
        for (const entry of [generation.entry, ...(generation.fallbacks ?? [])]) {
          const stage = onModel(generation, entry.model);
          const held = heldFor(stage, { credits: reserved, images: r.n });
          expect(boundOf(stage)).toBeLessThanOrEqual(reserved);
          const asAsked = Array.from({ length: r.n }, () => ({ ...r.size }));
          expect(deliveredCharge(stage, held, asAsked)).toEqual({ credits: boundOf(stage), overrun: 0 });
        }
      }),
    );
  });

  it('a success is charged the priced delivered quantities (at most n images), never more than held; the rest is overrun', () => {
    fc.assert(
      fc.property(request, fc.array(pixels, { maxLength: 6 }), fc.integer({ min: 0, max: 3 }), (r, delivered, tokenReports) => {
        const generation = stored(r);
        const reserved = reservedCredits(generation);
        const stage = onModel(generation, generation.entry.model);
        const held = heldFor(stage, { credits: reserved, images: r.n });
        const images = delivered.map((image, i) => ({
          ...image,
          ...(i < tokenReports ? { usage: { inputTokens: 10_000_000, outputTokens: 10_000_000 } } : {}),
        }));
        const charge = deliveredCharge(stage, held, images);
        const kept = delivered.slice(0, r.n);
        const cost = wholeCredits(
          costOf(generation.entry.credit_price!, {
            images: kept,
            quality: r.quality,
            inputImages: r.inputs,
            calls: 1,
            tokens:
              tokenReports > 0
                ? { input: 10_000_000 * Math.min(tokenReports, delivered.length), output: 10_000_000 * Math.min(tokenReports, delivered.length) }
                : undefined,
          }),
        );
        // Tokens are not bounded by the reservation: a report past it is overrun, as an oversized image is.
        expect(charge.credits + charge.overrun).toBe(cost);
        expect(charge.credits).toBeLessThanOrEqual(held.credits);
        expect(charge.overrun).toBe(Math.max(0, cost - held.credits));
      }),
    );
  });

  it('an upstream that delivers fewer images than n is charged fewer (a price per image)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 500 }), fc.integer({ min: 2, max: 4 }), pixels, (cents, n, size) => {
        const generation = stored({ prices: [{ currency: 'USD', terms: [{ meter: 'image', rate: cents / 100 }] }], n, size, quality: undefined, inputs: [] });
        const held = { credits: reservedCredits(generation) };
        expect(held.credits).toBe(n * cents);
        expect(deliveredCharge(generation, held, [size]).credits).toBe(cents);
      }),
    );
  });
});
