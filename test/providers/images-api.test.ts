import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
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
        { model: 'jimeng-4.5', provider: 'jimeng', transport: 'ark', upstream_model: 'doubao-seedream-4-5-251128', credits_per_image: 4, default_size: '2048x2048' },
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

  const creditsUsed = async () => (await t.api.admin('get', `/admin/keys/${keyId}`)).body.credits_used as number;

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
          seed: 5,
          watermark: false,
          sequential_image_generation: 'disabled',
        },
      ]),
    );
  });

  it('b64_json through Ark', async () => {
    const res = await t.api.client(key, { prompt: 'b64 please', model: 'jimeng-4.5', response_format: 'b64_json', size: '1024x1024' });
    expect(res.status).toBe(200);
    expect(res.body.data[0].b64_json).toMatch(/^iVBOR/);
  });

  it.each([
    ['InputTextSensitiveContentDetected:400', 400, 'content_policy_violation'],
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
    const res = await t.api.client(key, { prompt: 'three cubes', model: 'flux-dev', n: 3, response_format: 'b64_json' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ provider: 'selfhosted', usage: { images: 3, credits_charged: 6 } });
    expect(openai.requests.at(-1)).toEqual({ model: 'black-forest-labs/flux-dev', prompt: 'three cubes', size: '1024x1024', response_format: 'b64_json', n: 3 });
  });

  it('OpenAI content_policy_violation maps to ours', async () => {
    const res = await t.api.client(key, { prompt: 'x [error:content_policy_violation:400]', model: 'flux-dev' });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'content_policy_violation', param: 'prompt' });
  });
});
