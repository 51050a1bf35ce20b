import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';

describe('provider circuit breaker and concurrency cap', () => {
  let ark: FakeImagesApi;
  let t: TestGateway;
  let key: string;

  beforeAll(async () => {
    ark = await startFakeImagesApi({ apiKey: 'k', flavour: 'ark' });
    t = await startTestGateway({
      ARK_API_KEY: 'k',
      ARK_BASE_URL: ark.url,
      PROVIDER_JIMENG_BREAKER_THRESHOLD: '3',
      PROVIDER_JIMENG_BREAKER_COOLDOWN_MS: '60000',
      PROVIDER_JIMENG_MAX_CONCURRENCY: '2',
      PROVIDER_JIMENG_TIMEOUT_MS: '5000',
    });
    ({ key } = await t.createKey({ allowed_providers: ['jimeng'], credits_quota: 100000 }));
  });
  afterAll(async () => {
    await t.close();
    await ark.close();
  });

  const generate = (prompt: string) => t.api.client(key, { prompt, model: 'jimeng-4.5' });

  it('caps concurrent upstream calls per provider', async () => {
    const started = ark.requests.length;
    const arrived = () => ark.requests.length - started;
    // Six requests the fake holds until released; with a cap of 2 only two may reach it.
    const pending = Array.from({ length: 6 }, (_, i) => generate(`held ${i} [hold]`));
    while (arrived() < 2) await new Promise((resolve) => setTimeout(resolve, 10));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(arrived()).toBe(2);
    // Each release lets the next two in, until all six have been served.
    while (arrived() < 6) {
      ark.releaseHeld();
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    ark.releaseHeld();
    const results = await Promise.all(pending);
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);
  });

  it('opens after 3 provider failures: fails fast with 503 and Retry-After, content refusals do not count', async () => {
    await generate('refused [error:InputTextSensitiveContentDetected:400]');
    for (let i = 0; i < 3; i += 1) expect((await generate(`boom ${i} [error:InternalServiceError:500]`)).status).toBe(502);
    const before = ark.requests.length;
    const res = await generate('healthy prompt');
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe('provider_unavailable');
    expect(res.body.error.message).toContain('circuit open');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(50);
    expect(ark.requests.length).toBe(before);

    // After the cooldown one probe goes through; its success closes the circuit.
    t.clock.advanceMs(61_000);
    expect((await generate('probe')).status).toBe(200);
    expect((await generate('after probe')).status).toBe(200);
  });
});
