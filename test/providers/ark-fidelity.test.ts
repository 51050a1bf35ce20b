import { asWritten, DEFAULT_CATALOG } from '../../src/config/catalog';
import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { dataUri, testPng } from '../helpers/test-images';

/**
 * What the gateway sends Ark per model, and reads back, against the fake Ark that refuses what the
 * real one documents it refuses (BytePlus "Image generation API", docs.byteplus.com/en/docs/ModelArk/1541523).
 */
describe('Ark fidelity per model (fake Ark)', () => {
  const ENDPOINT = 'ep-20260101000000-t2i30';
  let ark: FakeImagesApi;
  let t: TestGateway;
  let key: string;
  let keyId: string;

  beforeAll(async () => {
    ark = await startFakeImagesApi({ apiKey: 'ark-test-key', flavour: 'ark', endpoints: { [ENDPOINT]: 'doubao-seedream-3-0-t2i-250415' } });
    t = await startTestGateway({
      ARK_API_KEY: 'ark-test-key',
      ARK_BASE_URL: `${ark.url}/api/v3`,
      MODEL_CATALOG: JSON.stringify([
        ...DEFAULT_CATALOG.map(asWritten),
        {
          model: 'seedream-4.0',
          provider: 'jimeng',
          transport: 'ark',
          upstream_model: 'doubao-seedream-4-0-250828',
          credits_per_image: 3,
          default_size: '2048x2048',
        },
        {
          model: 'seedream-3',
          provider: 'jimeng',
          transport: 'ark',
          upstream_model: 'doubao-seedream-3-0-t2i-250415',
          credits_per_image: 1,
          default_size: '1024x1024',
        },
        {
          model: 'seededit-3',
          provider: 'jimeng',
          transport: 'ark',
          upstream_model: 'doubao-seededit-3-0-i2i-250628',
          credits_per_image: 2,
          default_size: '1024x1024',
        },
        {
          model: 'jimeng-5.0-lite-png',
          provider: 'jimeng',
          transport: 'ark',
          upstream_model: 'doubao-seedream-5-0-260128',
          credits_per_image: 4,
          default_size: '2048x2048',
          upstream_options: { output_format: 'png' },
        },
        // A BytePlus id (no `doubao-`) and an endpoint id: only their declared family says which model they are.
        {
          model: 'seedream-4.5-byteplus',
          provider: 'jimeng',
          transport: 'ark',
          upstream_model: 'seedream-4-5-251128',
          upstream_family: 'seedream-4.5',
          credits_per_image: 4,
          default_size: '2048x2048',
        },
        {
          model: 'seedream-3-endpoint',
          provider: 'jimeng',
          transport: 'ark',
          upstream_model: ENDPOINT,
          upstream_family: 'seedream-3.0-t2i',
          credits_per_image: 1,
          default_size: '1024x1024',
        },
        // Catalog size rules beyond pixels and ratio: an enumerated set, and a grid.
        {
          model: 'local-enum',
          provider: 'local',
          upstream_model: 'local-1',
          credits_per_image: 1,
          default_size: '512x512',
          size_bounds: { min_pixels: 1, max_pixels: 1_048_576, min_ratio: 1 / 4, max_ratio: 4, allowed_sizes: ['512x512', '768x512'] },
        },
        {
          model: 'local-grid',
          provider: 'local',
          upstream_model: 'local-1',
          credits_per_image: 1,
          default_size: '512x512',
          size_bounds: { min_pixels: 1, max_pixels: 1_048_576, min_ratio: 1 / 4, max_ratio: 4, side_multiple: 16 },
        },
      ]),
      PROVIDER_JIMENG_RETRY_BASE_DELAY_MS: '5',
      PROVIDER_JIMENG_TIMEOUT_MS: '5000',
    });
    ({ key, id: keyId } = await t.createKey({ allowed_providers: ['jimeng', 'local'], credits_quota: 100000 }));
  });
  afterAll(async () => {
    await t.close();
    await ark.close();
  });

  const generate = (body: Record<string, unknown>) => t.api.client(key, body);
  const creditsUsed = () => t.api.creditsUsed(keyId);
  const sent = (prompt: string) => ark.requests.filter((r) => r.prompt === prompt);

  /** Refused with 400 invalid_request on `size` before anything is sent or charged. */
  const refusedSize = async (model: string, size: string) => {
    const calls = ark.requests.length;
    const credits = await creditsUsed();
    const res = await generate({ prompt: `refused ${model} ${size}`, model, size });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'size' });
    expect(ark.requests).toHaveLength(calls);
    expect(await creditsUsed()).toBe(credits);
  };

  describe('SeedEdit 3.0', () => {
    it('gets `size: "adaptive"` (the only size it takes), never WxH', async () => {
      const res = await generate({ prompt: 'seededit adaptive', model: 'seededit-3', images: [dataUri(testPng(40, 30))] });
      expect(res.status).toBe(200);
      expect(sent('seededit adaptive')).toEqual([expect.objectContaining({ model: 'doubao-seededit-3-0-i2i-250628', size: 'adaptive' })]);
    });

    it("the answer's size written `W×H` (U+00D7, as Ark's doc writes it) is the image's size, not the size asked", async () => {
      const res = await generate({ prompt: 'seededit size', model: 'seededit-3', size: '1024x1024', images: [dataUri(testPng(48, 32))] });
      expect(res.status).toBe(200);
      // The output follows the input; the fake answered "48×32".
      expect(res.body.data[0]).toMatchObject({ width: 48, height: 32 });
    });
  });

  describe('group output (`sequential_image_generation`) only to models that document it', () => {
    it.each([
      ['jimeng-5.0-lite', '2048x2048'],
      ['jimeng-4.5', '2048x2048'],
      ['seedream-4.0', '1024x1024'],
    ])('%s gets it, "disabled" (one image per call)', async (model, size) => {
      const prompt = `group ${model}`;
      expect((await generate({ prompt, model, size })).status).toBe(200);
      expect(sent(prompt)[0]).toMatchObject({ sequential_image_generation: 'disabled' });
    });

    it.each([
      ['seedream-3', {}],
      ['seededit-3', { images: [dataUri(testPng(40, 30))] }],
    ])('%s does not (the fake refuses a field the model does not document)', async (model, extra) => {
      const prompt = `no group ${model}`;
      const res = await generate({ prompt, model, ...extra });
      expect(res.status).toBe(200);
      expect(sent(prompt)[0]).not.toHaveProperty('sequential_image_generation');
    });
  });

  describe('Seedream 5.0 lite (jimeng-5.0-lite)', () => {
    it('is served as doubao-seedream-5-0-260128; its size bounds are published', async () => {
      const res = await generate({ prompt: 'five lite', model: 'jimeng-5.0-lite', seed: 7 });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ model: 'jimeng-5.0-lite', usage: { images: 1, credits_charged: 4 } });
      // No seed: 5.0 lite documents none.
      expect(sent('five lite')).toEqual([
        {
          model: 'doubao-seedream-5-0-260128',
          prompt: 'five lite',
          size: '2048x2048',
          response_format: 'url',
          watermark: false,
          sequential_image_generation: 'disabled',
        },
      ]);
      const model = await t.api.send('get', '/v1/models/jimeng-5.0-lite', { headers: { Authorization: `Bearer ${key}` } });
      expect(model.body.size_bounds).toEqual({ min_pixels: 3_686_400, max_pixels: 10_404_496, min_ratio: 1 / 16, max_ratio: 16 });
    });

    it.each(['1024x1024', '4096x4096', '3300x3200'])('%s (outside 3,686,400…10,404,496 pixels) is refused before anything is sent or charged', async (size) => {
      await refusedSize('jimeng-5.0-lite', size);
    });

    it('a 3K size near the top of the range (3264x3187 = 10,402,368 px) is sent', async () => {
      expect((await generate({ prompt: 'five lite 3k', model: 'jimeng-5.0-lite', size: '3264x3187' })).status).toBe(200);
      expect(sent('five lite 3k')[0]).toMatchObject({ size: '3264x3187' });
    });

    it("takes `output_format` from the catalog's upstream_options (only 5.0 lite documents it)", async () => {
      expect((await generate({ prompt: 'five lite png', model: 'jimeng-5.0-lite-png' })).status).toBe(200);
      expect(sent('five lite png')[0]).toMatchObject({ model: 'doubao-seedream-5-0-260128', output_format: 'png' });
    });
  });

  describe("ids the patterns cannot know, matched through the catalog's upstream_family", () => {
    it('a BytePlus id (seedream-4-5-251128) is Seedream 4.5: its sizes are checked, no seed, group output off', async () => {
      await refusedSize('seedream-4.5-byteplus', '1024x1024');
      const res = await generate({ prompt: 'byteplus 4.5', model: 'seedream-4.5-byteplus', seed: 3 });
      expect(res.status).toBe(200);
      expect(sent('byteplus 4.5')).toEqual([
        {
          model: 'seedream-4-5-251128',
          prompt: 'byteplus 4.5',
          size: '2048x2048',
          response_format: 'url',
          watermark: false,
          sequential_image_generation: 'disabled',
        },
      ]);
    });

    it('an endpoint id (ep-…) of Seedream 3.0 t2i gets its seed and its size bounds', async () => {
      await refusedSize('seedream-3-endpoint', '256x256');
      const res = await generate({ prompt: 'endpoint seed', model: 'seedream-3-endpoint', seed: 2147483647, n: 2 });
      expect(res.status).toBe(200);
      expect(
        sent('endpoint seed')
          .map((r) => r.seed)
          .sort(),
      ).toEqual([0, 2147483647]);
      expect(sent('endpoint seed')[0]).toMatchObject({ model: ENDPOINT });
    });
  });

  describe('Ark bills `usage.generated_images`: a mismatch with the images delivered is logged and booked', () => {
    const lastGeneration = () =>
      t.gateway.database.db
        .selectFrom('generations')
        .select(['id', 'status', 'unbilled_images', 'unbilled_reason'])
        .where('key_id', '=', keyId)
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .executeTakeFirstOrThrow();

    it("billed 3, delivered 1: the key pays the image delivered, the 2 others are the operator's loss", async () => {
      const credits = await creditsUsed();
      const res = await generate({ prompt: 'billed three [billed:3]', model: 'jimeng-4.5' });
      expect(res.status).toBe(200);
      expect(res.body.usage).toMatchObject({ images: 1, credits_charged: 4 });
      expect((await creditsUsed()) - credits).toBe(4);
      const row = await t.gateway.database.db
        .selectFrom('generations')
        .select(['unbilled_images', 'unbilled_reason'])
        .where('id', '=', res.body.id)
        .executeTakeFirstOrThrow();
      expect({ images: Number(row.unbilled_images), reason: row.unbilled_reason }).toEqual({ images: 2, reason: 'billed_undelivered' });
      expect(
        t.logs.some(
          (line) => line.includes('upstream billed a different number of images') && line.includes(res.body.id) && line.includes('"billed_images":3'),
        ),
      ).toBe(true);
    });

    it("billed 1, delivered none: the request fails uncharged and the billed image is the operator's loss", async () => {
      const credits = await creditsUsed();
      const res = await generate({ prompt: 'billed nothing delivered [empty] [billed:1]', model: 'jimeng-4.5' });
      expect(res.status).toBe(502);
      expect(await creditsUsed()).toBe(credits);
      const row = await lastGeneration();
      expect({ status: row.status, images: Number(row.unbilled_images), reason: row.unbilled_reason }).toEqual({
        status: 'failed',
        images: 1,
        reason: 'billed_undelivered',
      });
    });

    it('billed as delivered: no loss', async () => {
      const res = await generate({ prompt: 'billed as made', model: 'jimeng-4.5' });
      expect(res.status).toBe(200);
      const row = await lastGeneration();
      expect({ images: Number(row.unbilled_images), reason: row.unbilled_reason }).toEqual({ images: 0, reason: null });
    });
  });

  describe('catalog size rules: allowed_sizes and side_multiple', () => {
    it('only the enumerated sizes are taken', async () => {
      expect((await generate({ prompt: 'enum', model: 'local-enum', size: '768x512' })).status).toBe(200);
      const res = await generate({ prompt: 'enum', model: 'local-enum', size: '512x768' });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'size' });
      expect(res.body.error.message).toContain('512x512, 768x512');
    });

    it('each side must sit on the grid', async () => {
      expect((await generate({ prompt: 'grid', model: 'local-grid', size: '528x512' })).status).toBe(200);
      const credits = await creditsUsed();
      const res = await generate({ prompt: 'grid', model: 'local-grid', size: '520x512' });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'size' });
      expect(res.body.error.message).toContain('multiple of 16');
      expect(await creditsUsed()).toBe(credits);
    });
  });
});

/**
 * A channel that names its own upstream id for a catalog model (a BytePlus account's id, an Ark
 * endpoint) still serves that catalog model's family: the default catalog's jimeng-4.5 mapped to
 * an endpoint of the account is Seedream 4.5 to the gateway.
 */
describe('a channel mapping a catalog model to an endpoint id (fake Ark)', () => {
  const ENDPOINT = 'ep-20260101000000-s45';
  let ark: FakeImagesApi;
  let t: TestGateway;
  let key: string;

  beforeAll(async () => {
    ark = await startFakeImagesApi({ apiKey: 'ark-channel-key-0001', flavour: 'ark', endpoints: { [ENDPOINT]: 'doubao-seedream-4-5-251128' } });
    t = await startTestGateway({ PROVIDER_JIMENG_RETRY_BASE_DELAY_MS: '5' });
    const channel = await t.api.admin('post', '/admin/channels', {
      name: 'ark endpoints',
      provider: 'jimeng',
      transport: 'ark',
      base_url: ark.url,
      models: [{ model: 'jimeng-4.5', upstream_model: ENDPOINT }],
      credentials: { api_key: 'ark-channel-key-0001' },
    });
    expect(channel.status).toBe(201);
    ({ key } = await t.createKey({ allowed_providers: ['jimeng'], credits_quota: 1000 }));
  });
  afterAll(async () => {
    await t.close();
    await ark.close();
  });

  it("sends the endpoint id with Seedream 4.5's fields: group output off, no seed", async () => {
    const res = await t.api.client(key, { prompt: 'through an endpoint', model: 'jimeng-4.5', seed: 9 });
    expect(res.status).toBe(200);
    expect(ark.requests.at(-1)).toEqual({
      model: ENDPOINT,
      prompt: 'through an endpoint',
      size: '2048x2048',
      response_format: 'url',
      watermark: false,
      sequential_image_generation: 'disabled',
    });
  });
});
