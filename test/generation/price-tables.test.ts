import fc from 'fast-check';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';

/**
 * Issue #36 §4: a model's price may be a table by size and quality. The reservation takes the request's
 * price, settlement charges the delivered images at it, /v1/models publishes the table, the response's
 * usage shows the per-image price, and the key's book equals the sum of its generations' charges.
 */
const PRICE_TABLE = [
  { max_pixels: 64 * 64, quality: 'low', credits: 1, tier: 'small' },
  { max_pixels: 64 * 64, quality: 'high', credits: 4, tier: 'small' },
  { max_pixels: 64 * 64, credits: 2, tier: 'small' },
  { quality: 'high', credits: 9 },
  { credits: 5 },
];
const priceOf = (width: number, height: number, quality?: string): number => {
  const q = quality === 'auto' ? undefined : quality;
  const row = PRICE_TABLE.find((r) => r.quality === q && (r.max_pixels === undefined || width * height <= r.max_pixels));
  return row?.credits ?? 7;
};

describe('price tables by size and quality', () => {
  let t: TestGateway;

  beforeAll(async () => {
    t = await startTestGateway({
      MODEL_CATALOG: JSON.stringify({
        models: [{ model: 'priced-1', provider: 'local', upstream_model: 'local-1', credits_per_image: 7, default_size: '32x32', price_table: PRICE_TABLE }],
      }),
      GENERATION_POLL_MS: '50',
    });
  });
  afterAll(() => t.close());

  const creditsUsed = (id: string) => t.api.creditsUsed(id);

  it('GET /v1/models publishes the table and the fallback price', async () => {
    const { key } = await t.createKey({ allowed_providers: ['local'] });
    const res = await t.api.send('get', '/v1/models/priced-1', { headers: { Authorization: `Bearer ${key}` } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: 'priced-1', credits_per_image: 7, price_table: PRICE_TABLE });
    const local = await t.api.send('get', '/v1/models/local-1', { headers: { Authorization: `Bearer ${key}` } });
    expect(local.body).toMatchObject({ credits_per_image: 1 });
    expect(local.body.price_table).toBeUndefined();
  });

  it("charges the row of the request's size and quality, and says the per-image price", async () => {
    const { id, key } = await t.createKey({ allowed_providers: ['local'], credits_quota: 1000 });
    const cases: Array<[string, string | undefined, number]> = [
      ['32x32', 'low', 1],
      ['64x64', 'high', 4],
      ['64x64', undefined, 2],
      ['128x64', 'high', 9],
      ['128x64', undefined, 5],
      ['128x64', 'auto', 5],
    ];
    let total = 0;
    for (const [size, quality, price] of cases) {
      const res = await t.api.client(key, { prompt: 'priced', model: 'priced-1', size, n: 2, response_format: 'b64_json', ...(quality ? { quality } : {}) });
      expect(res.status).toBe(200);
      expect(res.body.usage).toMatchObject({ images: 2, credits_charged: 2 * price, credits_per_image: price });
      total += 2 * price;
    }
    expect(await creditsUsed(id)).toBe(total);
  });

  it('a quality the table does not price is refused with 400 before anything is charged', async () => {
    const { id, key } = await t.createKey({ allowed_providers: ['local'], credits_quota: 100 });
    const res = await t.api.client(key, { prompt: 'priced', model: 'priced-1', quality: 'medium' });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'quality' });
    expect(await creditsUsed(id)).toBe(0);
  });

  it('the OpenAI endpoint honours quality; an asynchronous generation is charged the same price', async () => {
    const { id, key } = await t.createKey({ allowed_providers: ['local'], credits_quota: 100 });
    const openai = await t.api.client(
      key,
      { prompt: 'priced', model: 'priced-1', size: '64x64', quality: 'high', response_format: 'b64_json' },
      '/v1/images/generations',
    );
    expect(openai.status).toBe(200);
    expect(await creditsUsed(id)).toBe(4);
    const queued = await t.api.send('post', '/images/generate', {
      body: { prompt: 'later', model: 'priced-1', size: '64x64', quality: 'low', n: 3 },
      headers: { Authorization: `Bearer ${key}`, Prefer: 'respond-async' },
    });
    expect(queued.status).toBe(202);
    expect(queued.body.usage.credits_reserved).toBe(3);
    await until(
      async () => (await t.api.send('get', `/generations/${queued.body.id}`, { headers: { Authorization: `Bearer ${key}` } })).body.status === 'succeeded',
      'the queued generation to succeed',
      10_000,
    );
    const done = await t.api.send('get', `/generations/${queued.body.id}`, { headers: { Authorization: `Bearer ${key}` } });
    expect(done.body.usage).toMatchObject({ images: 3, credits_charged: 3 });
    expect(await creditsUsed(id)).toBe(4 + 3);
  });

  it("property: over random sizes, qualities and n, the book is the sum of each request's n × row price", async () => {
    const { id, key } = await t.createKey({ allowed_providers: ['local'], credits_quota: 1_000_000 });
    let expected = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 16, max: 128 }),
        fc.integer({ min: 16, max: 128 }),
        fc.option(fc.constantFrom('low', 'high', 'auto'), { nil: undefined }),
        fc.integer({ min: 1, max: 4 }),
        async (width, height, quality, n) => {
          const res = await t.api.client(key, {
            prompt: 'random',
            model: 'priced-1',
            size: `${width}x${height}`,
            n,
            response_format: 'b64_json',
            ...(quality ? { quality } : {}),
          });
          expect(res.status).toBe(200);
          const price = priceOf(width, height, quality);
          expect(res.body.usage).toMatchObject({ credits_per_image: price, credits_charged: n * price });
          expected += n * price;
        },
      ),
      { numRuns: 25 },
    );
    expect(await creditsUsed(id)).toBe(expected);
  });
});
