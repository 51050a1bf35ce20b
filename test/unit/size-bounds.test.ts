import { DEFAULT_CATALOG, parseCatalog } from '../../src/config/catalog';
import { submitBody } from '../../src/providers/jimeng/visual-transport';
import { checkSize, sizeOutOfBounds, upstreamModelSpec, upstreamSeed } from '../../src/providers/upstream-models';

const bounds = (model: string) => DEFAULT_CATALOG.find((m) => m.model === model)?.size_bounds;

describe('model size bounds (pure)', () => {
  it("the default catalog carries each upstream's documented bounds", () => {
    expect(bounds('jimeng-4.5')).toEqual({ min_pixels: 3_686_400, max_pixels: 16_777_216, min_ratio: 1 / 16, max_ratio: 16 });
    // Jimeng 4.0 takes [1/16, 16) when min_ratio / max_ratio are sent (visual-transport.ts sends them outside 1/3…3).
    expect(bounds('jimeng-4.0')).toEqual({ min_pixels: 1024 * 1024, max_pixels: 4096 * 4096, min_ratio: 1 / 16, max_ratio: 16, max_ratio_exclusive: true });
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
    ['jimeng-4.0', 3200, 1024, undefined],
    // min_ratio / max_ratio are taken in [1/16, 16): 1:16 is in, 16:1 is not.
    ['jimeng-4.0', 256, 4096, undefined],
    ['jimeng-4.0', 4096, 256, /at least 1\/16 and below 16/],
    ['jimeng-4.0', 4095, 256, /at least 1048576/],
    ['jimeng-4.0', 4111, 257, undefined],
    ['jimeng-4.0', 4200, 256, /below 16/],
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

  it("catalog entries inherit their upstream model's bounds (dated Ark ids too), may set their own, and a default size outside them is a startup error", () => {
    const [ark, own, exclusive] = parseCatalog([
      { model: 's45', provider: 'jimeng', transport: 'ark', upstream_model: 'doubao-seedream-4-5-260101', credits_per_image: 1, default_size: '2048x2048' },
      { model: 'own', provider: 'x', credits_per_image: 1, size_bounds: { min_pixels: 1, max_pixels: 4_000_000, min_ratio: 0.5, max_ratio: 2 } },
      {
        model: 'below',
        provider: 'x',
        credits_per_image: 1,
        size_bounds: { min_pixels: 1, max_pixels: 4_000_000, min_ratio: 0.5, max_ratio: 2, max_ratio_exclusive: true },
      },
    ]);
    expect(exclusive!.size_bounds).toMatchObject({ max_ratio: 2, max_ratio_exclusive: true });
    expect(sizeOutOfBounds(2000, 1000, exclusive!.size_bounds!)).toMatch(/below 2/);
    expect(() =>
      parseCatalog([
        {
          model: 'x',
          provider: 'x',
          credits_per_image: 1,
          size_bounds: { min_pixels: 1, max_pixels: 9, min_ratio: 1, max_ratio: 1, max_ratio_exclusive: 'yes' },
        },
      ]),
    ).toThrow(/max_ratio_exclusive/);
    expect(ark!.size_bounds).toEqual(upstreamModelSpec('doubao-seedream-4-5-251128')!.sizes);
    expect(own!.size_bounds).toEqual({ min_pixels: 1, max_pixels: 4_000_000, min_ratio: 0.5, max_ratio: 2 });
    expect(() =>
      parseCatalog([{ model: 's45', provider: 'jimeng', upstream_model: 'doubao-seedream-4-5-251128', credits_per_image: 1, default_size: '1024x1024' }]),
    ).toThrow(/default_size.*outside the model's size bounds/);
    expect(() =>
      parseCatalog([{ model: 'x', provider: 'x', credits_per_image: 1, size_bounds: { min_pixels: 5, max_pixels: 1, min_ratio: 1, max_ratio: 1 } }]),
    ).toThrow(/minimum above its maximum/);
  });
});

describe('parameters sent per upstream model (pure)', () => {
  it('seed: only to models that document one, seed + index wrapped into their range; unknown models as before', () => {
    expect(upstreamSeed('doubao-seedream-4-5-251128', 5, 0)).toBeUndefined();
    expect(upstreamSeed('doubao-seedream-4-0-250828', 5, 0)).toBeUndefined();
    expect(upstreamSeed('jimeng_t2i_v40', 5, 0)).toBeUndefined();
    expect(upstreamSeed('jimeng_t2i_v31', 5, 1)).toBe(6);
    expect(upstreamSeed('jimeng_t2i_v31', 4294967295, 0)).toBe(2147483647);
    expect(upstreamSeed('doubao-seedream-3-0-t2i-250415', 2147483647, 1)).toBe(0);
    expect(upstreamSeed('doubao-seededit-3-0-i2i-250628', 7, 0)).toBe(7);
    expect(upstreamSeed('black-forest-labs/flux-dev', 4294967295, 2)).toBe(4294967297);
    expect(upstreamSeed('jimeng_t2i_v31', undefined, 0)).toBeUndefined();
  });

  it('visual submit bodies: v40 force_single and no seed, v31 seed and no force_single, catalog options last', () => {
    const request = { prompt: 'p', n: 1, width: 2048, height: 2048, seed: 3, responseFormat: 'url' as const };
    expect(submitBody({ ...request, upstreamModel: 'jimeng_t2i_v40', upstreamOptions: { scale: 0.3 } }, 0)).toEqual({
      req_key: 'jimeng_t2i_v40',
      prompt: 'p',
      width: 2048,
      height: 2048,
      force_single: true,
      scale: 0.3,
    });
    expect(submitBody({ ...request, upstreamModel: 'jimeng_t2i_v31' }, 1)).toEqual({
      req_key: 'jimeng_t2i_v31',
      prompt: 'p',
      width: 2048,
      height: 2048,
      seed: 4,
    });
    expect(submitBody({ ...request, upstreamModel: 'jimeng_t2i_v99' }, 0)).toEqual({
      req_key: 'jimeng_t2i_v99',
      prompt: 'p',
      width: 2048,
      height: 2048,
      seed: 3,
      force_single: true,
    });
  });
});
