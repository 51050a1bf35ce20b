import { DEFAULT_CATALOG, extendCatalog, parseCatalog } from '../../src/config/catalog';
import { readCatalog } from '../../src/config/gateway-config';
import { creditPriceOf, DEFAULT_CONVERSION } from '../../src/pricing/catalog-prices';
import { billedMegapixels, costOf, type Metered, wholeCredits } from '../../src/pricing/meters';
import { inCredits, parsePrice, type Price } from '../../src/pricing/price';

/** docs/operators/pricing.md, one rule at a time, without a gateway. */

const model = (name: string) => {
  const entry = readCatalog({ MODEL_CATALOG: undefined, MODEL_CATALOG_FILE: undefined }).find((e) => e.model === name);
  if (!entry) throw new Error(`no built-in model ${name}`);
  return entry;
};
const image = (size: string) => {
  const [width, height] = size.split('x').map(Number) as [number, number];
  return { width, height };
};
const credits = (name: string, metered: Partial<Metered> & Pick<Metered, 'images'>) =>
  wholeCredits(costOf(creditPriceOf(model(name)), { calls: 1, ...metered }));

describe('meters', () => {
  it('fal-flux-dev: $0.025 per megapixel, each image rounded up (2048×2048 is 5 MP, $0.125: 13 credits at one credit a cent)', () => {
    expect(billedMegapixels(image('2048x2048'), { meter: 'output_megapixel', rate: 0.025 })).toBe(5);
    expect(credits('fal-flux-dev', { images: [image('2048x2048')] })).toBe(13);
    expect(credits('fal-flux-dev', { images: [image('1024x768')] })).toBe(3);
    // Its largest size (14142 × 14142, 200 MP): $5.00, 500 credits.
    expect(credits('fal-flux-dev', { images: [image('14142x14142')] })).toBe(500);
    // Megapixels are rounded per image, credits once per generation: two 1 MP images are $0.05.
    expect(credits('fal-flux-dev', { images: [image('1000x1000'), image('1000x1000')] })).toBe(5);
  });

  it('flux-2-pro: 3¢ for the first megapixel of 1024², 1.5¢ each further one, 1.5¢ per input megapixel', () => {
    expect(credits('flux-2-pro', { images: [image('1024x1024')] })).toBe(3);
    expect(credits('flux-2-pro', { images: [image('2048x2048')] })).toBe(8); // 3 + 3 × 1.5 = 7.5
    // An edit with two 1 MP references: "editing from $0.045" per reference.
    expect(credits('flux-2-pro', { images: [image('1024x1024')], inputImages: [image('1024x1024'), image('1024x1024')] })).toBe(6);
  });

  it('an image term prices by quality and size tier; no quality (or auto) at the dearest quality', () => {
    expect(credits('gpt-image-1', { images: [image('1024x1024')], quality: 'low' })).toBe(2);
    expect(credits('gpt-image-1', { images: [image('1024x1536')], quality: 'high' })).toBe(25);
    expect(credits('gpt-image-1', { images: [image('1024x1024')], quality: 'auto' })).toBe(17);
    expect(credits('gpt-image-1', { images: [image('1024x1024'), image('1024x1024'), image('1024x1024')], quality: 'medium' })).toBe(15);
  });

  it('seconds of video by resolution and audio, tokens per million, a minimum per call', () => {
    const price: Price = {
      currency: 'credits',
      minimum_per_call: 10,
      terms: [
        { meter: 'video_second', resolution: '1080p', audio: true, rate: 40 },
        { meter: 'video_second', resolution: '1080p', rate: 30 },
        { meter: 'video_second', rate: 12 },
        { meter: 'output_token', rate: 240 },
      ],
    };
    expect(costOf(price, { images: [], video: { seconds: 8, resolution: '1080p', audio: true }, calls: 1 })).toBe(320);
    expect(costOf(price, { images: [], video: { seconds: 8, resolution: '1080p', audio: false }, calls: 1 })).toBe(240);
    expect(costOf(price, { images: [], video: { seconds: 5, resolution: '720p' }, calls: 1 })).toBe(60);
    expect(costOf(price, { images: [], tokens: { output: 100_000 }, calls: 1 })).toBe(24);
    expect(costOf(price, { images: [], tokens: { output: 1000 }, calls: 2 })).toBe(20);
  });

  it('money becomes credits at CREDITS_PER_USD × the markup; per-image rates round up to whole credits, others stay exact', () => {
    const money: Price = {
      currency: 'USD',
      terms: [
        { meter: 'image', rate: 0.011 },
        { meter: 'output_megapixel', rate: 0.025 },
      ],
    };
    expect(inCredits(money, DEFAULT_CONVERSION).terms.map((t) => t.rate)).toEqual([2, 2.5]);
    expect(inCredits(money, { creditsPerUsd: 1000, markup: 1 }).terms.map((t) => t.rate)).toEqual([11, 25]);
    expect(inCredits(money, DEFAULT_CONVERSION, 1.2).terms.map((t) => t.rate)).toEqual([2, 3]);
    expect(
      readCatalog({ MODEL_CATALOG: undefined, MODEL_CATALOG_FILE: undefined, CREDITS_PER_USD: 1000 }).find((e) => e.model === 'flux-pro-1.1')!
        .credits_per_image,
    ).toBe(40);
    expect(
      readCatalog({ MODEL_CATALOG: undefined, MODEL_CATALOG_FILE: undefined, PRICE_MARKUP: 1.5 }).find((e) => e.model === 'flux-pro-1.1')!.credits_per_image,
    ).toBe(6);
  });
});

describe('the catalog', () => {
  it("keeps today's credits for the models priced at a cent a credit before (their money price, converted)", () => {
    const perImage = Object.fromEntries(DEFAULT_CATALOG.map((entry) => [entry.model, entry.credits_per_image]));
    expect(perImage).toMatchObject({
      'local-1': 1,
      'fal-flux-kontext-pro': 4,
      'flux-pro-1.1': 4,
      'flux-kontext-pro': 4,
      'flux-2-pro': 3,
      'gemini-2.5-flash-image': 4,
    });
    expect(model('gemini-3-pro-image').price_table).toEqual([
      { tier: '1K', max_pixels: 1200 * 896, credits: 14 },
      { tier: '2K', max_pixels: 2400 * 1792, credits: 14 },
      { tier: '4K', credits: 24 },
    ]);
  });

  it('every built-in model priced in money names its source', () => {
    for (const entry of DEFAULT_CATALOG.filter((e) => e.price)) expect(entry.price!.source).toMatch(/https:\/\/|\.(ai|com)\//);
  });

  it('MODEL_CATALOG may price a model in money; credits given to a built-in model priced in money replace its price', () => {
    const [custom] = parseCatalog([
      {
        model: 'mine',
        provider: 'local',
        credits_per_image: undefined,
        price: { currency: 'USD', terms: [{ meter: 'output_megapixel', rate: 0.1 }] },
        default_size: '512x512',
      },
    ]);
    expect(custom!.credits_per_image).toBe(10);
    const changed = extendCatalog({ models: [{ model: 'fal-flux-dev', credits_per_image: 7 }] }).find((e) => e.model === 'fal-flux-dev')!;
    expect([changed.price, changed.credits_per_image, creditPriceOf(changed).terms]).toEqual([undefined, 7, [{ meter: 'image', rate: 7 }]]);
  });

  it('refuses a price it cannot read, naming the field', () => {
    expect(() => parsePrice({ currency: 'EUR', terms: [] }, 'entry 0')).toThrow('price.currency');
    expect(() => parsePrice({ currency: 'USD', terms: [{ meter: 'pixel', rate: 1 }] }, 'entry 0')).toThrow('"meter" must be one of');
    expect(() => parsePrice({ currency: 'USD', terms: [{ meter: 'image', rate: 1, resolution: '720p' }] }, 'entry 0')).toThrow(
      '"resolution" applies to video_second',
    );
    expect(() =>
      parseCatalog([{ model: 'x', provider: 'local', credits_per_image: 1, price: { currency: 'USD', terms: [{ meter: 'image', rate: 1 }] } }]),
    ).toThrow('not both');
  });
});
