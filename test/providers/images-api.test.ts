import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
import { SEEDREAM_4_INPUT_LIMITS } from '../helpers/documented-limits';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';

describe('jimeng-4.5 through Volcengine Ark, and an OpenAI-compatible provider (fake upstreams)', () => {
  let ark: FakeImagesApi;
  let openai: FakeImagesApi;
  let t: TestGateway;
  let key: string;
  let keyId: string;

  beforeAll(async () => {
    ark = await startFakeImagesApi({ apiKey: 'ark-test-key', flavour: 'ark' });
    openai = await startFakeImagesApi({ apiKey: 'sk-test', flavour: 'openai' });
    t = await startTestGateway({
      ARK_API_KEY: 'ark-test-key',
      ARK_BASE_URL: `${ark.url}/api/v3`,
      OPENAI_COMPAT_BASE_URL: `${openai.url}/v1`,
      OPENAI_COMPAT_API_KEY: 'sk-test',
      OPENAI_COMPAT_PROVIDER_NAME: 'selfhosted',
      MODEL_CATALOG: JSON.stringify([
        {
          model: 'jimeng-4.5',
          provider: 'jimeng',
          transport: 'ark',
          upstream_model: 'doubao-seedream-4-5-251128',
          credits_per_image: 4,
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
        { model: 'flux-dev', provider: 'selfhosted', upstream_model: 'black-forest-labs/flux-dev', credits_per_image: 2, default_size: '1024x1024' },
      ]),
      PROVIDER_JIMENG_RETRY_BASE_DELAY_MS: '5',
      PROVIDER_JIMENG_TIMEOUT_MS: '2000',
      PROVIDER_SELFHOSTED_RETRY_BASE_DELAY_MS: '5',
    });
    ({ key, id: keyId } = await t.createKey({ allowed_providers: ['jimeng', 'selfhosted'], credits_quota: 100000 }));
  });
  afterAll(async () => {
    await t.close();
    await ark.close();
    await openai.close();
  });

  const creditsUsed = () => t.api.creditsUsed(keyId);
  const generationRows = async () => (await t.gateway.database.db.selectFrom('generations').select('id').where('key_id', '=', keyId).execute()).length;

  it('jimeng-4.5 calls Ark with the Seedream model, watermark off, one call per image', async () => {
    const res = await t.api.client(key, { prompt: 'a harbour at night', model: 'jimeng-4.5', n: 2, seed: 5 });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ provider: 'jimeng', usage: { images: 2, credits_charged: 8 } });
    // Fetched from the upstream's own host and stored: the client gets the gateway's URL.
    expect(res.body.data[0]).toMatchObject({ url: expect.stringContaining(`${t.gateway.url}/images/img_`), width: 2048, height: 2048 });
    expect(ark.requests.slice(-2)).toEqual(
      expect.arrayContaining([
        {
          model: 'doubao-seedream-4-5-251128',
          prompt: 'a harbour at night',
          size: '2048x2048',
          response_format: 'url',
          // Seedream 4.x ignores `seed`: it is not sent.
          watermark: false,
          sequential_image_generation: 'disabled',
        },
      ]),
    );
  });

  it('Seedream 3.0 documents a seed: seed + index is sent, within its int32 range', async () => {
    const res = await t.api.client(key, { prompt: 'two kites', model: 'seedream-3', n: 2, seed: 2147483647, response_format: 'b64_json' });
    expect(res.status).toBe(200);
    const seeds = ark.requests.filter((r) => r.prompt === 'two kites').map((r) => r.seed);
    expect(seeds.sort()).toEqual([0, 2147483647]);
  });

  it('b64_json through Ark', async () => {
    const res = await t.api.client(key, { prompt: 'b64 please', model: 'jimeng-4.5', response_format: 'b64_json', size: '2560x1440' });
    expect(res.status).toBe(200);
    expect(res.body.data[0].b64_json).toMatch(/^iVBOR/);
  });

  it.each(['1024x1024', '8192x4096', '4096x200'])(
    'a size Seedream 4.5 does not take (%s) is 400 invalid_request on size, never sent nor charged',
    async (size) => {
      const before = await creditsUsed();
      const calls = ark.requests.length;
      const rows = await generationRows();
      const res = await t.api.client(key, { prompt: 'too small', model: 'jimeng-4.5', size });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'size' });
      expect(res.body.error.message).toContain('jimeng-4.5');
      expect(ark.requests).toHaveLength(calls);
      expect(await creditsUsed()).toBe(before);
      expect(await generationRows()).toBe(rows);
    },
  );

  it('the fake Ark refuses a size Seedream 4.5 does not take, as Ark does (the gateway never sends one)', async () => {
    const res = await fetch(`${ark.url}/api/v3/images/generations`, {
      method: 'POST',
      headers: { Authorization: 'Bearer ark-test-key', 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'doubao-seedream-4-5-251128', prompt: 'x', size: '1024x1024' }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('InvalidParameter');
  });

  it("GET /v1/models publishes each model's default size, size bounds and input limits", async () => {
    const res = await t.api.send('get', '/v1/models/jimeng-4.5', { headers: { Authorization: `Bearer ${key}` } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id: 'jimeng-4.5',
      object: 'model',
      created: 0,
      owned_by: 'jimeng',
      default_size: '2048x2048',
      credits_per_image: 4,
      credit_price: { currency: 'credits', terms: [{ meter: 'image', rate: 4 }] },
      size_bounds: { min_pixels: 3_686_400, max_pixels: 16_777_216, min_ratio: 1 / 16, max_ratio: 16 },
      input_limits: SEEDREAM_4_INPUT_LIMITS,
      max_prompt_chars: 4000,
      status: 'available',
    });
    const list = await t.api.send('get', '/v1/models', { headers: { Authorization: `Bearer ${key}` } });
    expect(list.body.data.find((m: { id: string }) => m.id === 'jimeng-4.5')).toEqual(res.body);
    // No documented bounds for an operator's own model: none published, none enforced.
    expect(list.body.data.find((m: { id: string }) => m.id === 'flux-dev')).toEqual({
      id: 'flux-dev',
      object: 'model',
      created: 0,
      owned_by: 'selfhosted',
      default_size: '1024x1024',
      credits_per_image: 2,
      credit_price: { currency: 'credits', terms: [{ meter: 'image', rate: 2 }] },
      max_prompt_chars: 4000,
      status: 'available',
    });
  });

  it.each([
    ['InputTextSensitiveContentDetected:400', 400, 'content_policy_violation'],
    ['InputTextRiskDetection:400', 400, 'content_policy_violation'],
    ['InputImageRiskDetection:400', 400, 'content_policy_violation'],
    ['OutputTextRiskDetection:400', 422, 'output_moderated'],
    ['OutputImageRiskDetection:400', 422, 'output_moderated'],
    ['OutputImageSensitiveContentDetected:400', 422, 'output_moderated'],
    ['InternalServiceError:500', 502, 'provider_error'],
    ['ServerOverloaded:429', 503, 'provider_busy'],
  ])('Ark error %s -> %i %s, refunded', async (scenario, status, code) => {
    const before = await creditsUsed();
    const res = await t.api.client(key, { prompt: `x [error:${scenario}]`, model: 'jimeng-4.5' });
    expect(res.status).toBe(status);
    expect(res.body.error.code).toBe(code);
    expect(await creditsUsed()).toBe(before);
  });

  it("Ark moderation refusals are the client's content: they never open the breaker (5 provider failures would)", async () => {
    for (let i = 0; i < 6; i += 1) {
      const code = ['InputTextRiskDetection', 'InputImageRiskDetection', 'OutputTextRiskDetection', 'OutputImageRiskDetection'][i % 4];
      expect((await t.api.client(key, { prompt: `risky ${i} [error:${code}:400]`, model: 'jimeng-4.5' })).status).not.toBe(503);
    }
    const res = await t.api.client(key, { prompt: 'a calm lake', model: 'jimeng-4.5', response_format: 'b64_json' });
    expect(res.status).toBe(200);
    const health = await t.internal.service('get', '/api/v1/creative/providers');
    expect(health.body.data.find((p: { name: string }) => p.name === 'jimeng')).toMatchObject({ circuit: 'closed' });
  });

  it('retries Ark 429s and succeeds', async () => {
    const res = await t.api.client(key, { prompt: 'retry me [busy:1]', model: 'jimeng-4.5' });
    expect(res.status).toBe(200);
    expect(ark.requests.filter((r) => r.prompt === 'retry me [busy:1]')).toHaveLength(2);
  });

  it('garbage, empty and slow answers map to 502, 502 and 504', async () => {
    expect((await t.api.client(key, { prompt: 'x [garbage]', model: 'jimeng-4.5' })).status).toBe(502);
    expect((await t.api.client(key, { prompt: 'x [empty]', model: 'jimeng-4.5' })).status).toBe(502);
    expect((await t.api.client(key, { prompt: 'x [slow:6000]', model: 'jimeng-4.5' })).status).toBe(504);
  });

  it('the OpenAI-compatible provider sends n in one call under its configured name', async () => {
    const res = await t.api.client(key, { prompt: 'three cubes', model: 'flux-dev', n: 3, response_format: 'b64_json', seed: 9 });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ provider: 'selfhosted', usage: { images: 3, credits_charged: 6 } });
    // A model the gateway's table does not know gets the seed as before.
    expect(openai.requests.at(-1)).toEqual({
      model: 'black-forest-labs/flux-dev',
      prompt: 'three cubes',
      size: '1024x1024',
      response_format: 'b64_json',
      n: 3,
      seed: 9,
    });
  });

  it("an OpenAI-compatible upstream answering more images than n: at most n are delivered, n charged, the rest booked as the operator's loss", async () => {
    const before = await creditsUsed();
    for (const response_format of ['url', 'b64_json'] as const) {
      const res = await t.api.client(key, { prompt: `two, answered four [extra-images:2] ${response_format}`, model: 'flux-dev', n: 2, response_format });
      expect(res.status).toBe(200);
      expect(res.body.data).toHaveLength(2);
      expect(res.body.usage).toMatchObject({ images: 2, credits_charged: 2 * res.body.usage.credits_per_image });
      // A synchronous b64_json answer keeps nothing; a URL one stores the n images it delivered.
      const stored = await t.gateway.database.db
        .selectFrom('stored_images')
        .select('position')
        .where('generation_id', '=', res.body.id as string)
        .execute();
      expect(stored.map((image) => image.position).sort()).toEqual(response_format === 'url' ? [0, 1] : []);
      const row = await t.gateway.database.db
        .selectFrom('generations')
        .selectAll()
        .where('id', '=', res.body.id as string)
        .executeTakeFirstOrThrow();
      expect({ images: Number(row.images), unbilled: Number(row.unbilled_images) }).toEqual({ images: 2, unbilled: 2 });
    }
    expect((await creditsUsed()) - before).toBe(4 * 2);
  });

  it('OpenAI content_policy_violation maps to ours', async () => {
    const res = await t.api.client(key, { prompt: 'x [error:content_policy_violation:400]', model: 'flux-dev' });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'content_policy_violation', param: 'prompt' });
  });
});
