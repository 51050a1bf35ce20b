import { DEFAULT_CATALOG, parseCatalog } from '../../src/config/catalog';
import { checkSize, sizeOutOfBounds, upstreamModelSpec } from '../../src/providers/upstream-models';

const bounds = (model: string) => DEFAULT_CATALOG.find((m) => m.model === model)?.size_bounds;

describe('model size bounds (pure)', () => {
  it('the default catalog carries each upstream\'s documented bounds', () => {
    expect(bounds('jimeng-4.5')).toEqual({ min_pixels: 3_686_400, max_pixels: 16_777_216, min_ratio: 1 / 16, max_ratio: 16 });
    expect(bounds('jimeng-4.0')).toEqual({ min_pixels: 1024 * 1024, max_pixels: 4096 * 4096, min_ratio: 1 / 3, max_ratio: 3 });
    expect(bounds('jimeng-3.1')).toMatchObject({ min_ratio: 1 / 3, max_ratio: 3 });
    expect(bounds('local-1')).toMatchObject({ min_side: 16, max_side: 1024 });
    for (const entry of DEFAULT_CATALOG) {
      const [w, h] = entry.default_size.split('x').map(Number) as [number, number];
      expect(sizeOutOfBounds(w, h, entry.size_bounds!)).toBeUndefined();
    }
  });

  it.each([
    // Seedream 4.5: 3,686,400…16,777,216 pixels, ratio 1/16…16.
    ['jimeng-4.5', 1024, 1024, /at least 3686400 pixels/],
    ['jimeng-4.5', 2560, 1440, undefined],
    ['jimeng-4.5', 1920, 1920, undefined],
    ['jimeng-4.5', 4096, 4096, undefined],
    ['jimeng-4.5', 4097, 4096, /at most 16777216/],
    ['jimeng-4.5', 8000, 480, /between 1\/16 and 16/],
    // Jimeng 4.0: 1024²…4096², ratio 1/3…3 (inclusive).
    ['jimeng-4.0', 1024, 1024, undefined],
    ['jimeng-4.0', 1023, 1024, /at least 1048576/],
    ['jimeng-4.0', 3072, 1024, undefined],
    ['jimeng-4.0', 1024, 3072, undefined],
    ['jimeng-4.0', 3200, 1024, /between 1\/3 and 3/],
    ['jimeng-4.0', 6198, 2656, undefined], // a documented 4K size: sides may pass 4096
    ['jimeng-4.0', 4096, 4097, /at most 16777216/],
    ['local-1', 2048, 16, /at most 1024 px/],
  ])('%s %ix%i', (model, width, height, problem) => {
    const why = sizeOutOfBounds(width, height, bounds(model)!);
    if (problem === undefined) expect(why).toBeUndefined();
    else expect(why).toMatch(problem);
  });

  it('checkSize refuses with 400 invalid_request on `size`; no bounds, no check', () => {
    expect(() => checkSize('jimeng-4.5', 1024, 1024, bounds('jimeng-4.5'))).toThrow(expect.objectContaining({ code: 'invalid_request', param: 'size' }));
    expect(() => checkSize('flux', 1, 99999, undefined)).not.toThrow();
  });

  it('catalog entries inherit their upstream model\'s bounds (dated Ark ids too), may set their own, and a default size outside them is a startup error', () => {
    const [ark, own] = parseCatalog([
      { model: 's45', provider: 'jimeng', transport: 'ark', upstream_model: 'doubao-seedream-4-5-260101', credits_per_image: 1, default_size: '2048x2048' },
      { model: 'own', provider: 'x', credits_per_image: 1, size_bounds: { min_pixels: 1, max_pixels: 4_000_000, min_ratio: 0.5, max_ratio: 2 } },
    ]);
    expect(ark!.size_bounds).toEqual(upstreamModelSpec('doubao-seedream-4-5-251128')!.sizes);
    expect(own!.size_bounds).toEqual({ min_pixels: 1, max_pixels: 4_000_000, min_ratio: 0.5, max_ratio: 2 });
    expect(() => parseCatalog([{ model: 's45', provider: 'jimeng', upstream_model: 'doubao-seedream-4-5-251128', credits_per_image: 1, default_size: '1024x1024' }])).toThrow(
      /default_size.*outside the model's size bounds/,
    );
    expect(() => parseCatalog([{ model: 'x', provider: 'x', credits_per_image: 1, size_bounds: { min_pixels: 5, max_pixels: 1, min_ratio: 1, max_ratio: 1 } }])).toThrow(/minimum above its maximum/);
  });
});
