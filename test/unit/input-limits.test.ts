import { DEFAULT_CATALOG, parseCatalog, upstreamLimitsOf } from '../../src/config/catalog';
import { upstreamModelSpec } from '../../src/providers/upstream-models';
import { SEEDREAM_4_INPUT_LIMITS } from '../helpers/documented-limits';

const inputs = (model: string) => DEFAULT_CATALOG.find((m) => m.model === model)?.input_limits;

describe('model input-image limits (pure)', () => {
  it("the default catalog carries each upstream's documented input limits", () => {
    expect(inputs('jimeng-4.5')).toEqual(SEEDREAM_4_INPUT_LIMITS);
    expect(inputs('jimeng-4.0')).toEqual({
      max_images: 10,
      formats: ['jpeg', 'png'],
      max_bytes: 15_000_000,
      min_ratio: 1 / 3,
      max_ratio: 3,
      max_side: 4096,
      max_inputs_plus_outputs: 15,
      mask: false,
      delivery: 'url',
    });
    // Jimeng 3.1 is text to image only.
    expect(inputs('jimeng-3.1')).toBeUndefined();
    expect(inputs('local-1')).toEqual({
      max_images: 4,
      formats: ['png', 'jpeg', 'webp', 'gif', 'bmp', 'tiff'],
      max_bytes: 10_000_000,
      mask: true,
      delivery: 'inline',
    });
  });

  it('Seedream 4.0 (dated ids) has the same inputs as 4.5; models the table does not know take none', () => {
    expect(upstreamModelSpec('doubao-seedream-4-0-250828')?.inputs).toEqual(inputs('jimeng-4.5'));
    expect(upstreamLimitsOf('doubao-seedream-4-0-250828').input_limits).toEqual(inputs('jimeng-4.5'));
    expect(upstreamLimitsOf('black-forest-labs/flux-dev')).toEqual({});
  });

  it("catalog entries inherit their upstream model's input limits, may set their own or none (null)", () => {
    const [ark, own, none, unknown] = parseCatalog([
      { model: 's40', provider: 'jimeng', transport: 'ark', upstream_model: 'doubao-seedream-4-0-250828', credits_per_image: 1, default_size: '2048x2048' },
      {
        model: 'own',
        provider: 'openai',
        upstream_model: 'gpt-image-1',
        credits_per_image: 1,
        input_limits: { max_images: 16, formats: ['png', 'webp', 'jpeg'], max_bytes: 50_000_000, mask: true },
      },
      {
        model: 'text-only',
        provider: 'jimeng',
        transport: 'ark',
        upstream_model: 'doubao-seedream-4-5-251128',
        credits_per_image: 1,
        default_size: '2048x2048',
        input_limits: null,
      },
      { model: 'plain', provider: 'openai', credits_per_image: 1 },
    ]);
    expect(ark!.input_limits).toEqual(inputs('jimeng-4.5'));
    expect(own!.input_limits).toEqual({ max_images: 16, formats: ['png', 'webp', 'jpeg'], max_bytes: 50_000_000, mask: true, delivery: 'inline' });
    expect(none).not.toHaveProperty('input_limits');
    expect(unknown).not.toHaveProperty('input_limits');
  });

  it.each([
    [[], /must be an object/],
    [{ formats: ['png'], max_bytes: 1 }, /needs max_images and max_bytes/],
    [{ max_images: 0, formats: ['png'], max_bytes: 1 }, /max_images" must be an integer >= 1/],
    [{ max_images: 1, formats: [], max_bytes: 1 }, /formats" must be a non-empty array/],
    [{ max_images: 1, formats: ['svg'], max_bytes: 1 }, /formats" must be a non-empty array/],
    [{ max_images: 1, formats: ['png'], max_bytes: 1, mask: 'yes' }, /mask" must be true or false/],
    [{ max_images: 1, formats: ['png'], max_bytes: 1, delivery: 'ftp' }, /delivery" must be "inline" or "url"/],
    [{ max_images: 1, formats: ['png'], max_bytes: 1, min_ratio: 2, max_ratio: 1 }, /min_ratio above max_ratio/],
    [{ max_images: 1, formats: ['png'], max_bytes: 1, max_images_total: 3 }, /unknown field\(s\) max_images_total/],
    [{ max_images: 1, formats: ['png'], max_bytes: 1, max_inputs_plus_outputs: 1 }, /must leave room for an output/],
  ])('a wrong input_limits stops the gateway at startup: %j', (limits, message) => {
    expect(() => parseCatalog([{ model: 'x', provider: 'x', credits_per_image: 1, input_limits: limits }])).toThrow(message);
  });
});
