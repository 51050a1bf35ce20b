import { type CatalogModel, DEFAULT_CATALOG, priceCatalog } from '../../src/config/catalog';
import { deliveredCharge } from '../../src/generation/charges';
import type { StoredGenerationRequest } from '../../src/generation/durable';
import { DEFAULT_CONVERSION } from '../../src/pricing/catalog-prices';
import { deliveredCostUsd, endedCostUsd, imagesCostUsd, marginUsd } from '../../src/usage/upstream-cost';

/** The upstream cost a settlement records (docs/operators/pricing.md "Reading margin"), without a gateway. */
const catalog = new Map(priceCatalog(DEFAULT_CATALOG, DEFAULT_CONVERSION).map((entry) => [entry.model, entry]));
const falFluxDev = catalog.get('fal-flux-dev') as CatalogModel;
const creditsOnly: CatalogModel = { model: 'credits-only', provider: 'local', upstream_model: 'local', credits_per_image: 3, default_size: '1024x1024' };

function stored(entry: CatalogModel, n: number, width: number, height: number): StoredGenerationRequest {
  return {
    entry,
    request: { prompt: 'p', upstreamModel: entry.upstream_model, n, width, height, responseFormat: 'url' },
    keep_base64: false,
    mark_sends: true,
  };
}

describe('upstream cost in US dollars', () => {
  it('fal flux/dev at 2048x2048: 5 MP (4.19 rounded up) at $0.025 = $0.125, the price of the 13 credits charged', () => {
    const stage = stored(falFluxDev, 1, 2048, 2048);
    const image = { width: 2048, height: 2048 };
    expect(deliveredCostUsd(stage, [image])).toBe(0.125);
    expect(deliveredCharge(stage, { credits: 1000 }, [image]).credits).toBe(13);
    expect(marginUsd(13, 0.125, 100)).toBe(0.005);
  });

  it('one image of n: 3 costs one image; images beyond n are not delivered and not counted as delivered', () => {
    const stage = stored(falFluxDev, 3, 1000, 1000);
    expect(deliveredCostUsd(stage, [{ width: 1000, height: 1000 }])).toBe(0.025);
    expect(
      deliveredCostUsd(
        stage,
        Array.from({ length: 5 }, () => ({ width: 1000, height: 1000 })),
      ),
    ).toBe(0.075);
    // Billed and not delivered: at the request's price per image.
    expect(deliveredCostUsd(stage, [{ width: 1000, height: 1000 }], 2)).toBe(0.075);
  });

  it('images billed for a failure or kept by a cancel cost the price per image; nothing billed costs 0', () => {
    const stage = stored(falFluxDev, 2, 1024, 1024);
    // 1024x1024 is 1.05 MP, billed 2 MP: $0.05 an image.
    expect(imagesCostUsd(stage, 2)).toBe(0.1);
    expect(imagesCostUsd(stage, 0)).toBe(0);
    const row = { id: 'gen_1', request: JSON.stringify(stage), model: 'fal-flux-dev', credits: 10, images: 2 };
    expect(endedCostUsd(row, 5, 0)).toBe(0.05);
    expect(endedCostUsd(row, 0, 1)).toBe(0.05);
    expect(endedCostUsd(row, 10, 0)).toBe(0.1);
    expect(endedCostUsd({ ...row, request: null }, 5, 0)).toBeNull();
  });

  it('a model priced in credits only has an unknown cost (null, never 0) and no margin', () => {
    const stage = stored(creditsOnly, 1, 1024, 1024);
    expect(deliveredCostUsd(stage, [{ width: 1024, height: 1024 }])).toBeNull();
    expect(imagesCostUsd(stage, 1)).toBeNull();
    expect(marginUsd(3, null, 100)).toBeNull();
  });
});
