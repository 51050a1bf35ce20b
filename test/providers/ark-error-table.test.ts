import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';

/** Ark's error table (src/providers/ark/ark-errors.ts) over the fake Ark, as a client sees it. */
describe('Ark error codes: what the gateway does with each family (fake Ark)', () => {
  let ark: FakeImagesApi;
  let t: TestGateway;
  let key: string;

  beforeAll(async () => {
    ark = await startFakeImagesApi({ apiKey: 'ark-test-key', flavour: 'ark' });
    t = await startTestGateway({
      ARK_API_KEY: 'ark-test-key',
      ARK_BASE_URL: `${ark.url}/api/v3`,
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
      ]),
      PROVIDER_JIMENG_RETRY_BASE_DELAY_MS: '5',
      PROVIDER_JIMENG_TIMEOUT_MS: '2000',
    });
    ({ key } = await t.createKey({ allowed_providers: ['jimeng'], credits_quota: 100000 }));
  });
  afterAll(async () => {
    await t.close();
    await ark.close();
  });

  const circuit = async () =>
    (await t.internal.service('get', '/api/v1/creative/providers')).body.data.find((p: { name: string }) => p.name === 'jimeng').circuit as string;
  const callsFor = (prompt: string) => ark.requests.filter((r) => r.prompt === prompt).length;

  it("moderation sub-codes (…SensitiveContentDetected.*, *RiskDetection.*) are the client's content, and never open the breaker", async () => {
    const codes = ['InputImageSensitiveContentDetected.PrivacyInformation', 'InputTextSensitiveContentDetected.PolicyViolation', 'InputTextRiskDetection.Sub'];
    for (let i = 0; i < 6; i += 1) {
      const res = await t.api.client(key, { prompt: `sub ${i} [error:${codes[i % codes.length]}:400]`, model: 'jimeng-4.5' });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('content_policy_violation');
    }
    expect(await circuit()).toBe('closed');
  });

  it("InvalidEndpointOrModel.* and ModelNotOpen are the channel's configuration: not counted against the breaker", async () => {
    for (let i = 0; i < 6; i += 1) {
      const code = i % 2 === 0 ? 'InvalidEndpointOrModel.NotFound:404' : 'ModelNotOpen:404';
      expect((await t.api.client(key, { prompt: `config ${i} [error:${code}]`, model: 'jimeng-4.5' })).status).not.toBe(200);
    }
    expect(await circuit()).toBe('closed');
    expect((await t.api.client(key, { prompt: 'after configuration errors', model: 'jimeng-4.5' })).status).toBe(200);
  });

  it("ContentSecurityDetectionError (Ark's moderation service down) is retried", async () => {
    const prompt = 'moderation down [error:ContentSecurityDetectionError:500]';
    await t.api.client(key, { prompt, model: 'jimeng-4.5' });
    expect(callsFor(prompt)).toBeGreaterThan(1);
  });

  it('Seedream 3.0 t2i sizes outside [512², 2048²]: 400 on size, nothing sent', async () => {
    const before = ark.requests.length;
    for (const size of ['256x256', '4096x4096']) {
      const res = await t.api.client(key, { prompt: `seedream 3 ${size}`, model: 'seedream-3', size });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'size' });
    }
    expect(ark.requests.length).toBe(before);
  });

  it.each(['SetLimitExceeded:429', 'QuotaExceeded:429'])('%s (spend cap, quota) is an account problem: not retried as if busy', async (scenario) => {
    const prompt = `spend cap [error:${scenario}]`;
    const res = await t.api.client(key, { prompt, model: 'jimeng-4.5' });
    expect(res.status).not.toBe(200);
    expect(callsFor(prompt)).toBe(1);
  });
});
