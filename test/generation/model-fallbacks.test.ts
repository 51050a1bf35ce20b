import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
import { Books, UPSTREAM_REFUSAL } from '../helpers/books';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';

/**
 * Issue #36 §5, model fallbacks: `prime` (3 credits an image) falls back to `second` (5) and then
 * `spare` (the local renderer, 1). Each Ark model has one API channel on a fake of its own, so an
 * outage of one (the fake answering 500, or no channel at all) leaves the other serving. The
 * reservation is `n` x the dearest price of the chain the key may use, the charge the price of the
 * model that delivered, and the books stay exact.
 */
const ARK_KEY = 'ark-key-fallbacks-0001';
const CATALOG = [
  { model: 'local-1', provider: 'local', upstream_model: 'local-1', credits_per_image: 1, default_size: '256x256' },
  {
    model: 'prime',
    provider: 'jimeng',
    transport: 'ark',
    upstream_model: 'prime-up',
    credits_per_image: 3,
    default_size: '1024x1024',
    fallbacks: ['second', 'spare'],
  },
  { model: 'second', provider: 'jimeng', transport: 'ark', upstream_model: 'second-up', credits_per_image: 5, default_size: '1024x1024' },
  { model: 'spare', provider: 'local', upstream_model: 'local-1', credits_per_image: 1, default_size: '256x256' },
  // No channel lists it: in the catalog, waiting for the operator's account.
  { model: 'orphan', provider: 'jimeng', transport: 'ark', upstream_model: 'orphan-up', credits_per_image: 2, default_size: '1024x1024' },
];

describe('model fallbacks', () => {
  let t: TestGateway;
  let primeFake: FakeImagesApi;
  let secondFake: FakeImagesApi;
  let books: Books;
  const channels: Record<string, string> = {};

  beforeAll(async () => {
    primeFake = await startFakeImagesApi({ apiKey: ARK_KEY, flavour: 'ark' });
    secondFake = await startFakeImagesApi({ apiKey: ARK_KEY, flavour: 'ark' });
    // A breaker that never opens here: each test's outage is its own.
    t = await startTestGateway({ MODEL_CATALOG: JSON.stringify(CATALOG), PROVIDER_JIMENG_BREAKER_THRESHOLD: '1000', GENERATION_POLL_MS: '50' });
    books = new Books(t.gateway.database.db);
    for (const [model, fake] of [
      ['prime', primeFake],
      ['second', secondFake],
    ] as const) {
      const res = await t.api.admin('post', '/admin/channels', {
        name: model,
        provider: 'jimeng',
        transport: 'ark',
        base_url: fake.url,
        models: [{ model }],
        credentials: { api_key: ARK_KEY },
      });
      expect(res.status).toBe(201);
      channels[model] = res.body.id as string;
    }
  });
  afterAll(async () => {
    await t.close();
    await primeFake.close();
    await secondFake.close();
  });
  afterEach(async () => {
    primeFake.setMode('normal');
    secondFake.setMode('normal');
    primeFake.releaseHeld();
    secondFake.releaseHeld();
    expect(await books.violations()).toEqual([]);
  });

  const newKey = async (overrides: Record<string, unknown> = {}) => t.createKey({ allowed_providers: ['jimeng', 'local'], credits_quota: 1000, ...overrides });
  const creditsUsed = async (id: string) => Number((await t.api.admin('get', `/admin/keys/${id}`)).body.credits_used);
  const generate = (key: string, body: Record<string, unknown>, path = '/images/generate') =>
    t.api.client(key, { model: 'prime', size: '1024x1024', response_format: 'b64_json', ...body }, path);
  const attemptsOf = async (id: string) =>
    (await t.internal.service('get', `/api/v1/creative/generations/${id}`)).body.attempts as Array<Record<string, unknown>>;
  const resourceOf = async (key: string, id: string) => (await t.api.send('get', `/generations/${id}`, { headers: { Authorization: `Bearer ${key}` } })).body;
  const callsTo = (fake: FakeImagesApi) => fake.requests.length;
  /** Ark makes one call per image: waits until all `n` of a held request are held (the fake records each just before it holds it). */
  const heldCalls = (fake: FakeImagesApi, tag: string, n: number) =>
    until(() => fake.requests.filter((r) => String(r.prompt).includes(`[hold:${tag}]`)).length === n, `${n} calls of ${tag} held`);

  it("GET /v1/models publishes a model's fallbacks, those of its chain the key may use", async () => {
    const { key } = await newKey();
    const list = await t.api.send('get', '/v1/models', { headers: { Authorization: `Bearer ${key}` } });
    const byId = new Map((list.body.data as Array<{ id: string; fallbacks?: string[] }>).map((m) => [m.id, m]));
    expect(byId.get('prime')?.fallbacks).toEqual(['second', 'spare']);
    expect(byId.get('second')?.fallbacks).toBeUndefined();
    const { key: narrow } = await newKey({ allowed_models: ['prime', 'spare'] });
    const one = await t.api.send('get', '/v1/models/prime', { headers: { Authorization: `Bearer ${narrow}` } });
    expect(one.body.fallbacks).toEqual(['spare']);
    const internal = await t.internal.service('get', '/api/v1/creative/models');
    expect((internal.body.data as Array<{ model: string; fallbacks?: string[] }>).find((m) => m.model === 'prime')?.fallbacks).toEqual(['second', 'spare']);
  });

  it('GET /v1/models says which models a channel serves: available, degraded (its only channel disabled), unconfigured (none)', async () => {
    const { key } = await newKey();
    const statuses = async () => {
      const list = await t.api.send('get', '/v1/models', { headers: { Authorization: `Bearer ${key}` } });
      expect(list.status).toBe(200);
      return Object.fromEntries((list.body.data as Array<{ id: string; status: string }>).map((m) => [m.id, m.status]));
    };
    expect(await statuses()).toEqual({ 'local-1': 'available', prime: 'available', second: 'available', spare: 'available', orphan: 'unconfigured' });
    expect((await t.api.admin('patch', `/admin/channels/${channels.prime}`, { status: 'disabled' })).status).toBe(200);
    try {
      expect(await statuses()).toMatchObject({ prime: 'degraded', second: 'available', orphan: 'unconfigured' });
      const one = await t.api.send('get', '/v1/models/prime', { headers: { Authorization: `Bearer ${key}` } });
      expect(one.body.status).toBe('degraded');
      const internal = await t.internal.service('get', '/api/v1/creative/models');
      const internalStatus = Object.fromEntries((internal.body.data as Array<{ model: string; status: string }>).map((m) => [m.model, m.status]));
      expect(internalStatus).toMatchObject({ prime: 'degraded', second: 'available', orphan: 'unconfigured' });
    } finally {
      await t.api.admin('patch', `/admin/channels/${channels.prime}`, { status: 'enabled' });
    }
    const orphan = await generate(key, { model: 'orphan', prompt: 'nobody serves me' });
    expect(orphan.status).toBe(503);
  });

  it('the requested model delivers: it reserves the dearest price of the chain and is charged its own', async () => {
    const { id, key } = await newKey();
    const response = generate(key, { prompt: 'prime delivers [hold:p1]', n: 2 });
    await heldCalls(primeFake, 'p1', 2);
    // Reserved for `second` (5 an image), the dearest model it may fall back to.
    expect(await creditsUsed(id)).toBe(10);
    primeFake.releaseHeld('p1');
    const res = await response;
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      model: 'prime',
      requested_model: 'prime',
      provider: 'jimeng',
      usage: { images: 2, credits_charged: 6, credits_per_image: 3, credits_remaining: 994 },
    });
    expect(await creditsUsed(id)).toBe(6);
    expect((await resourceOf(key, res.body.id)).usage).toEqual({ images: 2, credits_reserved: 0, credits_charged: 6 });
  });

  it("a provider outage of the requested model falls back to the next: charged the delivering model's price, attempts show the chain", async () => {
    const { id, key } = await newKey();
    primeFake.setMode('failing');
    const secondCalls = callsTo(secondFake);
    const res = await generate(key, { prompt: 'prime is down', n: 2 });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      model: 'second',
      requested_model: 'prime',
      provider: 'jimeng',
      usage: { images: 2, credits_charged: 10, credits_per_image: 5, credits_remaining: 990 },
    });
    expect(callsTo(secondFake) - secondCalls).toBe(2);
    expect(await creditsUsed(id)).toBe(10);
    const attempts = await attemptsOf(res.body.id);
    // Prime's two calls go out together; once one has failed the other is not sent if it has not
    // been yet (channel-failover.ts), so prime shows one or two failed-over attempts.
    const primeAttempts = attempts.filter((a) => a.model === 'prime');
    expect(primeAttempts.length).toBeGreaterThanOrEqual(1);
    expect(primeAttempts.length).toBeLessThanOrEqual(2);
    expect(attempts.map((a) => [a.model, a.channel_id, a.outcome])).toEqual([
      ...primeAttempts.map(() => ['prime', channels.prime, 'failed_over']),
      ['second', channels.second, 'succeeded'],
      ['second', channels.second, 'succeeded'],
    ]);
    expect(await resourceOf(key, res.body.id)).toMatchObject({
      status: 'succeeded',
      model: 'second',
      requested_model: 'prime',
      usage: { images: 2, credits_charged: 10 },
    });
    const usageRow = (await t.internal.service('get', `/api/v1/creative/generations/${res.body.id}`)).body;
    expect(usageRow).toMatchObject({ model: 'second', requested_model: 'prime', credits: 10, status: 'succeeded' });
  });

  it('no channel serving the requested model at all (disabled) falls back too', async () => {
    const { key } = await newKey();
    expect((await t.api.admin('patch', `/admin/channels/${channels.prime}`, { status: 'disabled' })).status).toBe(200);
    try {
      const res = await generate(key, { prompt: 'prime has no channel' });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ model: 'second', requested_model: 'prime', usage: { credits_charged: 5 } });
      expect((await attemptsOf(res.body.id)).map((a) => a.model)).toEqual(['second']);
    } finally {
      await t.api.admin('patch', `/admin/channels/${channels.prime}`, { status: 'enabled' });
    }
  });

  it("a refusal of the client's content never falls back, and costs nothing", async () => {
    const { id, key } = await newKey();
    const secondCalls = callsTo(secondFake);
    const res = await generate(key, { prompt: `refused ${UPSTREAM_REFUSAL}` });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('content_policy_violation');
    expect(callsTo(secondFake)).toBe(secondCalls);
    expect(await creditsUsed(id)).toBe(0);
  });

  it('`fallback: false` keeps the request on its model (native and OpenAI-compatible)', async () => {
    const { id, key } = await newKey();
    primeFake.setMode('failing');
    const secondCalls = callsTo(secondFake);
    const native = await generate(key, { prompt: 'no fallback', fallback: false });
    expect(native.status).toBe(502);
    expect(native.body.error.code).toBe('provider_error');
    const openai = await t.api.client(
      key,
      { model: 'prime', prompt: 'no fallback either', fallback: false, response_format: 'b64_json' },
      '/v1/images/generations',
    );
    expect(openai.status).toBe(502);
    expect(callsTo(secondFake)).toBe(secondCalls);
    expect(await creditsUsed(id)).toBe(0);
    // The OpenAI-compatible endpoint falls back by default.
    const fellBack = await t.api.client(key, { model: 'prime', prompt: 'fallback by default', response_format: 'b64_json' }, '/v1/images/generations');
    expect(fellBack.status).toBe(200);
    expect(await creditsUsed(id)).toBe(5);
  });

  it('a key not allowed a fallback model skips it', async () => {
    const { id, key } = await newKey({ allowed_models: ['prime', 'spare'] });
    primeFake.setMode('failing');
    const secondCalls = callsTo(secondFake);
    const res = await generate(key, { prompt: 'skips second', n: 2 });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      model: 'spare',
      requested_model: 'prime',
      provider: 'local',
      usage: { images: 2, credits_charged: 2, credits_per_image: 1 },
    });
    expect(callsTo(secondFake)).toBe(secondCalls);
    expect(await creditsUsed(id)).toBe(2);
    // Prime's second call is not sent when the first has already failed (see the test above).
    const models = (await attemptsOf(res.body.id)).map((a) => a.model);
    expect(models).toEqual([...models.filter((m) => m === 'prime'), 'spare']);
    expect(models.length === 2 || models.length === 3).toBe(true);
  });

  it("a fallback that does not take the request's size is skipped", async () => {
    const { key } = await newKey();
    primeFake.setMode('failing');
    secondFake.setMode('failing');
    // The local renderer (`spare`) makes at most 1024 px a side.
    const large = await generate(key, { prompt: 'too large for spare', size: '2048x2048' });
    expect(large.status).toBe(502);
    expect((await attemptsOf(await lastGeneration())).map((a) => a.model)).toEqual(['prime', 'second']);
    const fits = await generate(key, { prompt: 'fits spare', size: '512x512' });
    expect(fits.status).toBe(200);
    expect(fits.body).toMatchObject({ model: 'spare', requested_model: 'prime' });
  });

  it('an asynchronous generation falls back: running on the fallback it shows that model and the reservation; settled, the charge', async () => {
    const { id, key } = await newKey();
    primeFake.setMode('failing');
    const queued = await t.api.send('post', '/images/generate', {
      body: { prompt: 'async fallback [hold:a1]', model: 'prime', n: 3, size: '1024x1024' },
      headers: { Authorization: `Bearer ${key}`, Prefer: 'respond-async' },
    });
    expect(queued.status).toBe(202);
    expect(queued.body).toMatchObject({ model: 'prime', requested_model: 'prime', usage: { credits_reserved: 15 } });
    await heldCalls(secondFake, 'a1', 3);
    await until(async () => (await resourceOf(key, queued.body.id)).model === 'second', 'the generation to name its fallback');
    expect(await resourceOf(key, queued.body.id)).toMatchObject({
      status: 'running',
      model: 'second',
      requested_model: 'prime',
      usage: { credits_reserved: 15, credits_charged: 0 },
    });
    expect(await creditsUsed(id)).toBe(15);
    secondFake.releaseHeld('a1');
    await until(async () => (await resourceOf(key, queued.body.id)).status === 'succeeded', 'the generation to succeed');
    expect(await resourceOf(key, queued.body.id)).toMatchObject({
      model: 'second',
      requested_model: 'prime',
      usage: { images: 3, credits_reserved: 0, credits_charged: 15 },
    });
    expect(await creditsUsed(id)).toBe(15);
  });

  it('queued work of a model with no usable channel is taken by a worker once a fallback has room', async () => {
    const { id, key } = await newKey();
    expect((await t.api.admin('patch', `/admin/channels/${channels.prime}`, { status: 'disabled' })).status).toBe(200);
    try {
      const queued = await t.api.send('post', '/images/generate', {
        body: { prompt: 'queued while prime is down', model: 'prime', size: '1024x1024' },
        headers: { Authorization: `Bearer ${key}`, Prefer: 'respond-async' },
      });
      expect(queued.status).toBe(202);
      await until(async () => (await resourceOf(key, queued.body.id)).status === 'succeeded', 'the queued generation to run on its fallback');
      expect(await resourceOf(key, queued.body.id)).toMatchObject({ model: 'second', requested_model: 'prime', usage: { credits_charged: 5 } });
      expect(await creditsUsed(id)).toBe(5);
    } finally {
      await t.api.admin('patch', `/admin/channels/${channels.prime}`, { status: 'enabled' });
    }
  });

  it("an asynchronous generation its requested model delivers is charged that model's price", async () => {
    const { id, key } = await newKey();
    const queued = await t.api.send('post', '/images/generate', {
      body: { prompt: 'async prime', model: 'prime', n: 2, size: '1024x1024' },
      headers: { Authorization: `Bearer ${key}`, Prefer: 'wait=10' },
    });
    expect(queued.status).toBe(200);
    expect(queued.body).toMatchObject({
      model: 'prime',
      requested_model: 'prime',
      usage: { images: 2, credits_charged: 6, credits_per_image: 3, credits_remaining: 994 },
    });
    expect(await creditsUsed(id)).toBe(6);
  });

  it('a cancel keeps the credits of the calls sent at the price of the model running them', async () => {
    const { id, key } = await newKey();
    const response = generate(key, { prompt: 'cancel on prime [hold:c1]', n: 2 });
    await heldCalls(primeFake, 'c1', 2);
    const running = (await t.gateway.database.db.selectFrom('generations').select('id').where('request', 'like', '%[hold:c1]%').executeTakeFirstOrThrow()).id;
    const canceled = await t.api.send('post', `/generations/${running}/cancel`, { headers: { Authorization: `Bearer ${key}` } });
    expect(canceled.status).toBe(200);
    // Reserved 10 (second's price), kept 6: both calls were sent on `prime`, at 3 each.
    expect(canceled.body).toMatchObject({ status: 'canceled', model: 'prime', usage: { credits_charged: 6 } });
    primeFake.releaseHeld('c1');
    expect((await response).body.error.code).toBe('generation_finished');
    expect(await creditsUsed(id)).toBe(6);
  });

  it("the internal API falls back over the whole chain and records the delivering model's price", async () => {
    primeFake.setMode('failing');
    const res = await t.internal.service('post', '/api/v1/creative/images/generations', {
      prompt: 'service fallback',
      model: 'prime',
      n: 2,
      size: '1024x1024',
      response_format: 'b64_json',
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ model: 'second', requested_model: 'prime', usage: { images: 2, credits: 10 } });
    const off = await t.internal.service('post', '/api/v1/creative/images/generations', { prompt: 'service no fallback', model: 'prime', fallback: false });
    expect(off.status).toBe(502);
  });

  async function lastGeneration(): Promise<string> {
    const row = await t.gateway.database.db
      .selectFrom('generations')
      .select('id')
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .executeTakeFirstOrThrow();
    return row.id;
  }
});
