import fc from 'fast-check';
import { type PriceRow, checkQuality, creditsPerImage, parsePriceTable } from '../../src/config/price-table';
import { creditsOf } from '../../src/generation/charges';

/** Prices by size and quality (src/config/price-table.ts): which row prices a request, and that the books charge exactly the delivered images. */
const TABLE: PriceRow[] = [
  { max_pixels: 1024 * 1024, quality: 'low', credits: 1, tier: '1K' },
  { max_pixels: 1024 * 1024, quality: 'high', credits: 4, tier: '1K' },
  { max_pixels: 1024 * 1024, credits: 2, tier: '1K' },
  { quality: 'high', credits: 8 },
  { credits: 3 },
];
const entry = { model: 'priced', credits_per_image: 9, price_table: TABLE };

describe('creditsPerImage', () => {
  it.each([
    [1024, 1024, 'low', 1],
    [1024, 1024, 'high', 4],
    [1024, 1024, undefined, 2],
    [1024, 1024, 'auto', 2],
    [1536, 1024, 'high', 8],
    [1536, 1024, undefined, 3],
    [512, 512, 'low', 1],
  ])('%ix%i quality %s costs %i per image', (width, height, quality, credits) => {
    expect(creditsPerImage(entry, { width, height, ...(quality ? { quality } : {}) })).toBe(credits);
  });

  it('falls back to credits_per_image where no row fits, or without a table', () => {
    expect(creditsPerImage(entry, { width: 1536, height: 1024, quality: 'low' })).toBe(9);
    expect(creditsPerImage({ credits_per_image: 5 }, { width: 64, height: 64, quality: 'high' })).toBe(5);
  });
});

describe('checkQuality', () => {
  it('refuses a quality the table does not price (400, param quality); takes the priced ones, none and auto', () => {
    expect(() => checkQuality(entry, 'medium')).toThrow(expect.objectContaining({ code: 'invalid_request', param: 'quality' }));
    for (const quality of ['low', 'high', 'auto', undefined]) expect(() => checkQuality(entry, quality)).not.toThrow();
  });

  it('a model whose table names no quality takes any (and ignores it)', () => {
    expect(() => checkQuality({ model: 'flat', price_table: [{ credits: 1 }] }, 'hd')).not.toThrow();
    expect(() => checkQuality({ model: 'flat' }, 'medium')).not.toThrow();
  });
});

describe('parsePriceTable', () => {
  it('keeps the rows as written', () => {
    expect(parsePriceTable(TABLE, 'entry 0')).toEqual(TABLE);
  });

  it.each([
    [[], /non-empty array/],
    [[{ credits: -1 }], /"credits" must be an integer >= 0/],
    [[{ credits: 1.5 }], /"credits" must be an integer >= 0/],
    [[{ credits: 1, max_pixels: 0 }], /"max_pixels" must be an integer >= 1/],
    [[{ credits: 1, quality: 'ultra' }], /"quality" must be one of/],
    [[{ credits: 1, quality: 'auto' }], /"quality" must be one of/],
    [[{ credits: 1, price: 2 }], /unknown field "price"/],
  ])('refuses %j', (table, message) => {
    expect(() => parsePriceTable(table, 'entry 0')).toThrow(message);
  });
});

describe('the books under price tables (property)', () => {
  const row = fc.record(
    {
      credits: fc.integer({ min: 0, max: 50 }),
      max_pixels: fc.integer({ min: 1, max: 4096 * 4096 }),
      quality: fc.constantFrom('low', 'medium', 'high', 'standard', 'hd'),
    },
    { requiredKeys: ['credits'] },
  );
  it('a generation that reserved n images at its price and delivered k keeps exactly k × price', () => {
    fc.assert(
      fc.property(
        fc.array(row, { minLength: 1, maxLength: 6 }),
        fc.integer({ min: 0, max: 50 }),
        fc.integer({ min: 16, max: 4096 }),
        fc.integer({ min: 16, max: 4096 }),
        fc.option(fc.constantFrom('low', 'medium', 'high', 'standard', 'hd', 'auto'), { nil: undefined }),
        fc.integer({ min: 1, max: 4 }).chain((n) => fc.tuple(fc.constant(n), fc.integer({ min: 0, max: n }))),
        (table, fallback, width, height, quality, [n, delivered]) => {
          const model = { credits_per_image: fallback, price_table: table as PriceRow[] };
          const price = creditsPerImage(model, { width, height, ...(quality ? { quality } : {}) });
          const reserved = n * price;
          // What a partial failure, a cancel or a disconnect keeps: the delivered (or sent) images' credits.
          expect(creditsOf(delivered, { credits: reserved, images: n })).toBe(delivered * price);
        },
      ),
      { numRuns: 500 },
    );
  });
});
