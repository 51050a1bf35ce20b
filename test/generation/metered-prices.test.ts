import { routeOutboundForTests } from '../../src/shared/outbound';
import { type FakeBfl, startFakeBfl } from '../fakes/fake-bfl';
import { type FakeFal, startFakeFal } from '../fakes/fake-fal';
import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
import { type FakeOpenAIImages, startFakeOpenAIImages } from '../fakes/fake-openai-images';
import { Books } from '../helpers/books';
import { dataUri, testPng } from '../helpers/test-images';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';

/**
 * Prices that follow what each upstream bills (docs/operators/pricing.md), through the gateway to
 * fakes that answer real sizes and counts: a reservation of the most a request can cost, a charge of
 * what was delivered, the key's and the project's books exact. Both engines.
 */
const DELIVERY_HOST = 'delivery-eu1.bfl.ai';

describe('metered prices: charged what the upstream bills for what it delivered', () => {
  let fal: FakeFal;
  let bfl: FakeBfl;
  let openai: FakeOpenAIImages;
  let compatible: FakeImagesApi;
  let t: TestGateway;
  let project: string;

  beforeAll(async () => {
    fal = await startFakeFal({ apiKey: 'fal-id:fal-secret' });
    bfl = await startFakeBfl({ apiKey: 'bfl-key-0001', deliveryHost: DELIVERY_HOST });
    openai = await startFakeOpenAIImages({ apiKey: 'sk-openai' });
    compatible = await startFakeImagesApi({ apiKey: 'sk-compatible', flavour: 'openai' });
    routeOutboundForTests((url) => (url.host === DELIVERY_HOST ? bfl.url : undefined));
    t = await startTestGateway({
      FAL_KEY: 'fal-id:fal-secret',
      FAL_BASE_URL: fal.url,
      BFL_API_KEY: 'bfl-key-0001',
      BFL_BASE_URL: bfl.url,
      OPENAI_API_KEY: 'sk-openai',
      OPENAI_BASE_URL: `${openai.url}/v1`,
      OPENAI_COMPAT_BASE_URL: `${compatible.url}/v1`,
      OPENAI_COMPAT_API_KEY: 'sk-compatible',
      OPENAI_COMPAT_PROVIDER_NAME: 'selfhosted',
      MODEL_CATALOG: JSON.stringify({
        models: [{ model: 'flux-dev', provider: 'selfhosted', upstream_model: 'black-forest-labs/flux-dev', credits_per_image: 10, default_size: '1024x1024' }],
      }),
      UPSTREAM_POLL_INTERVAL_MS: '5',
    });
    const created = await t.api.admin('post', '/admin/projects', { name: 'metered', owner: 'o', credits_quota: 100_000, quota_period_days: 30 });
    expect(created.status).toBe(201);
    project = created.body.id as string;
  });
  afterAll(async () => {
    routeOutboundForTests(undefined);
    await t.close();
    await Promise.all([fal.close(), bfl.close(), openai.close(), compatible.close()]);
  });

  const newKey = (providers: string[]) => t.createKey({ allowed_providers: providers, credits_quota: 10_000, project_id: project });
  async function booksExact(keyId: string): Promise<void> {
    const books = new Books(t.gateway.database.db);
    await books.observe();
    expect(await books.violations({ settled: true, keyId })).toEqual([]);
  }

  it('fal-flux-dev at 2048×2048: 5 megapixels at $0.025, 13 credits; at the largest size the gateway takes, 9999×9999: 100 MP, 250 credits', async () => {
    const { id, key } = await newKey(['fal']);
    const small = await t.api.client(key, { prompt: 'a 4 MP field', model: 'fal-flux-dev', size: '2048x2048' });
    expect(small.status).toBe(200);
    expect(small.body.usage).toMatchObject({ images: 1, credits_charged: 13, credits_per_image: 13 });
    const largest = await t.api.client(key, { prompt: 'the largest field', model: 'fal-flux-dev', size: '9999x9999' });
    expect(largest.status).toBe(200);
    expect(largest.body.usage).toMatchObject({ images: 1, credits_charged: 250 });
    expect(await t.api.creditsUsed(id)).toBe(263);
    await booksExact(id);
  });

  it('flux-2-pro with two 1 MP references: 3¢ for the image and 1.5¢ for each reference, 6 credits', async () => {
    const { id, key } = await newKey(['bfl']);
    const reference = dataUri(testPng(1024, 1024));
    const res = await t.api.send('post', '/images/generate', {
      body: { prompt: 'two references', model: 'flux-2-pro', size: '1024x1024', images: [reference, reference] },
      headers: { Authorization: `Bearer ${key}` },
    });
    expect(res.status).toBe(200);
    expect(await t.api.creditsUsed(id)).toBe(6);
    await booksExact(id);
  });

  it('gpt-image-1 at each size and quality: OpenAI’s per-image price at a cent a credit, rounded up', async () => {
    const { id, key } = await newKey(['openai']);
    const expected: Array<[string, string, number]> = [
      ['1024x1024', 'low', 2],
      ['1536x1024', 'low', 2],
      ['1024x1024', 'medium', 5],
      ['1024x1536', 'medium', 7],
      ['1024x1024', 'high', 17],
      ['1536x1024', 'high', 25],
    ];
    let total = 0;
    for (const [size, quality, credits] of expected) {
      const res = await t.api.client(key, { prompt: `gpt ${size} ${quality}`, model: 'gpt-image-1', size, quality, response_format: 'b64_json' });
      expect([size, quality, res.status, res.body.usage?.credits_charged]).toEqual([size, quality, 200, credits]);
      total += credits;
    }
    expect(await t.api.creditsUsed(id)).toBe(total);
    await booksExact(id);
  });

  it('an upstream that answers 1 image for n: 3 costs one image; the rest of the reservation goes back to the key and the project', async () => {
    const { id, key } = await newKey(['selfhosted']);
    const projectBefore = (await t.api.admin('get', `/admin/projects/${project}`)).body.credits_used as number;
    const res = await t.api.client(key, { prompt: 'one of three [deliver:1]', model: 'flux-dev', n: 3, response_format: 'b64_json' });
    expect(res.status).toBe(200);
    expect(res.body.data).toHaveLength(1);
    expect(res.body.usage).toMatchObject({ images: 1, credits_charged: 10, credits_per_image: 10 });
    expect(await t.api.creditsUsed(id)).toBe(10);
    expect((await t.api.admin('get', `/admin/projects/${project}`)).body.credits_used).toBe(projectBefore + 10);
    await booksExact(id);
  });
});
