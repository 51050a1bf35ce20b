import http from 'node:http';
import { asWritten, DEFAULT_CATALOG } from '../../src/config/catalog';
import { routeOutboundForTests } from '../../src/shared/outbound';
import { type FakeVisual, startFakeVisual } from '../fakes/fake-volc-visual';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';

const credentials = { accessKeyId: 'AKtest', secretAccessKey: 'secret-for-tests' };
/** The real API's result URLs are on p<N>-aiop-sign.byteimg.com; so are the fake's here. */
const IMAGE_HOST = 'p3-aiop-sign.byteimg.com';

describe('jimeng through the Volcengine visual API (fake upstream)', () => {
  let fake: FakeVisual;
  let t: TestGateway;
  let key: string;
  let keyId: string;

  /** Image URLs the gateway downloaded (routed back to the fake for IMAGE_HOST). */
  const downloaded: string[] = [];

  beforeAll(async () => {
    fake = await startFakeVisual(credentials, 0, { imageHost: IMAGE_HOST });
    routeOutboundForTests((url) => {
      if (url.host !== IMAGE_HOST) return undefined;
      downloaded.push(url.href);
      return fake.url;
    });
    t = await startTestGateway({
      VOLC_ACCESS_KEY_ID: credentials.accessKeyId,
      VOLC_SECRET_ACCESS_KEY: credentials.secretAccessKey,
      VOLC_VISUAL_ENDPOINT: fake.url,
      VOLC_POLL_INTERVAL_MS: '5',
      PROVIDER_JIMENG_RETRY_BASE_DELAY_MS: '5',
      PROVIDER_JIMENG_TIMEOUT_MS: '2500',
      PROVIDER_JIMENG_BREAKER_THRESHOLD: '1000',
      // The default jimeng models, plus one with upstream_options (scale) from the catalog.
      MODEL_CATALOG: JSON.stringify([
        ...DEFAULT_CATALOG.map(asWritten),
        {
          model: 'jimeng-4.0-loose',
          provider: 'jimeng',
          transport: 'visual',
          upstream_model: 'jimeng_t2i_v40',
          credits_per_image: 3,
          default_size: '1024x1024',
          upstream_options: { scale: 0.3 },
        },
      ]),
    });
    ({ key, id: keyId } = await t.createKey({ allowed_providers: ['jimeng'], credits_quota: 100000 }));
  });
  afterAll(async () => {
    routeOutboundForTests(undefined);
    await t.close();
    await fake.close();
  });

  const generate = (prompt: string, extra: Record<string, unknown> = {}) => t.api.client(key, { prompt, model: 'jimeng-4.0', size: '1024x1024', ...extra });
  const creditsUsed = () => t.api.creditsUsed(keyId);

  it('submits a signed task, polls until done and returns URLs', async () => {
    const before = fake.requests.length;
    const res = await generate('a red fox [pending:3]', { seed: 11 });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ model: 'jimeng-4.0', provider: 'jimeng', usage: { images: 1, credits_charged: 3 } });
    expect(res.body.data[0]).toMatchObject({ url: expect.stringContaining(`${t.gateway.url}/images/img_`), width: 1024, height: 1024 });
    // Taken from the visual API's own image host, which the default IMAGE_FETCH_ALLOWED_HOSTS admits.
    expect(downloaded.at(-1)).toMatch(/^https:\/\/p3-aiop-sign\.byteimg\.com\/files\/png-task-\d+-1024x1024\.png\?rk3s=/);
    const calls = fake.requests.slice(before);
    expect(calls[0]).toEqual({
      action: 'CVSync2AsyncSubmitTask',
      // jimeng_t2i_v40 documents no seed: it is not sent.
      body: { req_key: 'jimeng_t2i_v40', prompt: 'a red fox [pending:3]', width: 1024, height: 1024, force_single: true },
    });
    expect(calls.filter((c) => c.action === 'CVSync2AsyncGetResult')).toHaveLength(4);
    expect(calls[1]!.body).toMatchObject({ req_key: 'jimeng_t2i_v40', req_json: '{"return_url":true}' });
  });

  it('jimeng_t2i_v31 gets its seed (seed + index, within its int32 range) and no force_single', async () => {
    const res = await generate('two herons', { model: 'jimeng-3.1', n: 2, seed: 2147483647, response_format: 'b64_json' });
    expect(res.status).toBe(200);
    const submits = fake.requests.filter((r) => r.action === 'CVSync2AsyncSubmitTask' && r.body.prompt === 'two herons');
    expect(submits.map((r) => r.body).sort((a, b) => Number(a.seed) - Number(b.seed))).toEqual([
      { req_key: 'jimeng_t2i_v31', prompt: 'two herons', width: 1024, height: 1024, seed: 0 },
      { req_key: 'jimeng_t2i_v31', prompt: 'two herons', width: 1024, height: 1024, seed: 2147483647 },
    ]);
    const wrapped = await generate('a big seed', { model: 'jimeng-3.1', seed: 4294967295, response_format: 'b64_json' });
    expect(wrapped.status).toBe(200);
    expect(fake.requests.filter((r) => r.body.prompt === 'a big seed')[0]?.body.seed).toBe(2147483647);
  });

  it('sends catalog upstream_options (e.g. scale) with the task', async () => {
    const res = await generate('loose interpretation', { model: 'jimeng-4.0-loose' });
    expect(res.status).toBe(200);
    const submit = fake.requests.filter((r) => r.action === 'CVSync2AsyncSubmitTask').at(-1);
    expect(submit?.body).toMatchObject({ req_key: 'jimeng_t2i_v40', scale: 0.3, force_single: true });
  });

  it.each([
    ['jimeng-4.0', '1024x768'],
    ['jimeng-4.0', '4200x256'],
    ['jimeng-3.1', '3000x3000'],
  ])('%s at %s: 400 invalid_request on size, nothing submitted nor charged', async (model, size) => {
    const before = await creditsUsed();
    const calls = fake.requests.length;
    const res = await generate('out of bounds', { model, size });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'size' });
    expect(fake.requests).toHaveLength(calls);
    expect(await creditsUsed()).toBe(before);
  });

  it('jimeng-4.0 at 1:16 sends min_ratio 1/16; 16:1 is refused before anything is sent or charged (max_ratio is taken in [1/16, 16))', async () => {
    const tall = await generate('a tall banner', { size: '256x4096' });
    expect(tall.status).toBe(200);
    const submit = fake.requests.filter((r) => r.action === 'CVSync2AsyncSubmitTask').at(-1);
    expect(submit?.body).toMatchObject({ width: 256, height: 4096, min_ratio: 1 / 16, max_ratio: 3 });
    const before = await creditsUsed();
    const submits = fake.requests.filter((r) => r.action === 'CVSync2AsyncSubmitTask').length;
    const wide = await generate('a 16:1 banner', { size: '4096x256' });
    expect(wide.status).toBe(400);
    expect(wide.body.error).toMatchObject({ code: 'invalid_request', param: 'size' });
    expect(wide.body.error.message).toContain('below 16');
    expect(fake.requests.filter((r) => r.action === 'CVSync2AsyncSubmitTask')).toHaveLength(submits);
    expect(await creditsUsed()).toBe(before);
  });

  it('jimeng-4.0 outside 1/3…3 (4096x1024) sends min_ratio / max_ratio, which unlock 1/16…16; inside, neither is sent', async () => {
    const res = await generate('wide banner', { model: 'jimeng-4.0', size: '4096x1024' });
    expect(res.status).toBe(200);
    const submit = fake.requests.filter((r) => r.action === 'CVSync2AsyncSubmitTask').at(-1);
    expect(submit?.body).toMatchObject({ req_key: 'jimeng_t2i_v40', width: 4096, height: 1024, min_ratio: 1 / 3, max_ratio: 4 });
    expect((await generate('square', { model: 'jimeng-4.0', size: '2048x2048' })).status).toBe(200);
    const square = fake.requests.filter((r) => r.action === 'CVSync2AsyncSubmitTask').at(-1);
    expect(square?.body).not.toHaveProperty('min_ratio');
    expect(square?.body).not.toHaveProperty('max_ratio');
  });

  it('returns b64_json when asked, and one task per image', async () => {
    const res = await generate('two owls', { n: 2, response_format: 'b64_json', model: 'jimeng-3.1' });
    expect(res.status).toBe(200);
    expect(res.body.data).toHaveLength(2);
    expect(res.body.data[0].b64_json).toMatch(/^iVBOR/);
    expect(res.body.usage.credits_charged).toBe(4);
  });

  it("a task answering more images than its one: n are delivered (one per task), n charged, the rest booked as the operator's loss", async () => {
    const before = await creditsUsed();
    for (const response_format of ['url', 'b64_json'] as const) {
      const prompt = `two asked, six answered [extra-images:2] ${response_format}`;
      const fetchedBefore = downloaded.length;
      const res = await generate(prompt, { n: 2, response_format });
      expect(res.status).toBe(200);
      expect(res.body.data).toHaveLength(2);
      expect(res.body.usage).toMatchObject({ images: 2, credits_charged: 6 });
      expect(fake.requests.filter((r) => r.action === 'CVSync2AsyncSubmitTask' && r.body.prompt === prompt)).toHaveLength(2);
      // Only the delivered images are fetched and stored (a URL answer), each task's first.
      expect(downloaded.length - fetchedBefore).toBe(response_format === 'url' ? 2 : 0);
      for (const url of downloaded.slice(fetchedBefore)) expect(url).toMatch(/\/files\/png-task-\d+-1024x1024\.png/);
      const row = await t.gateway.database.db
        .selectFrom('generations')
        .selectAll()
        .where('id', '=', res.body.id as string)
        .executeTakeFirstOrThrow();
      expect({ images: Number(row.images), unbilled: Number(row.unbilled_images) }).toEqual({ images: 2, unbilled: 4 });
      const stored = await t.gateway.database.db
        .selectFrom('stored_images')
        .select('position')
        .where('generation_id', '=', res.body.id as string)
        .execute();
      expect(stored.map((image) => image.position).sort()).toEqual(response_format === 'url' ? [0, 1] : []);
    }
    expect((await creditsUsed()) - before).toBe(2 * 6);
  });

  it.each([
    [50411, 400, 'content_policy_violation'],
    [50412, 400, 'content_policy_violation'],
    [50413, 400, 'content_policy_violation'],
    [50500, 502, 'provider_error'],
    [50501, 502, 'provider_error'],
  ])('submit code %i -> %i %s, credits released', async (code, status, errorCode) => {
    const before = await creditsUsed();
    const res = await generate(`a scene [code:${code}]`);
    expect(res.status).toBe(status);
    expect(res.body.error.code).toBe(errorCode);
    expect(await creditsUsed()).toBe(before);
  });

  it.each([
    [50511, 3],
    [50512, 1],
    [50519, 3],
  ])('result code %i -> 422 output_moderated after %i task(s), credits released', async (code, tasks) => {
    const before = await creditsUsed();
    const prompt = `a scene [post-code:${code}]`;
    const res = await generate(prompt);
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('output_moderated');
    expect(await creditsUsed()).toBe(before);
    // 50511 / 50519 are documented as retryable: new tasks, up to 3 in all; 50512 is not.
    expect(fake.requests.filter((r) => r.action === 'CVSync2AsyncSubmitTask' && r.body.prompt === prompt)).toHaveLength(tasks);
  });

  it.each([50511, 50519])('result code %i once: a new task is submitted and its image returned', async (code) => {
    const prompt = `a retried scene [post-code:${code}] [post-code-times:1]`;
    const res = await generate(prompt, { response_format: 'b64_json' });
    expect(res.status).toBe(200);
    expect(res.body.usage.credits_charged).toBe(3);
    expect(fake.requests.filter((r) => r.action === 'CVSync2AsyncSubmitTask' && r.body.prompt === prompt)).toHaveLength(2);
  });

  it('retries 50429 with backoff and succeeds when the upstream recovers', async () => {
    const res = await generate('busy twice [busy:2]');
    expect(res.status).toBe(200);
    expect(fake.requests.filter((r) => r.action === 'CVSync2AsyncSubmitTask' && r.body.prompt === 'busy twice [busy:2]')).toHaveLength(3);
  });

  it('gives up on a busy upstream after bounded retries: 503 provider_busy with Retry-After, refunded', async () => {
    const before = await creditsUsed();
    const res = await generate('always busy [code:50430]');
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe('provider_busy');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    expect(fake.requests.filter((r) => r.body.prompt === 'always busy [code:50430]')).toHaveLength(3);
    expect(await creditsUsed()).toBe(before);
  });

  it('502 provider_error for a garbage body and for a lost task', async () => {
    for (const prompt of ['x [garbage]', 'x [lost]']) {
      const res = await generate(prompt);
      expect(res.status).toBe(502);
      expect(res.body.error.code).toBe('provider_error');
    }
  });

  it('504 provider_timeout past the deadline, refunded', async () => {
    const before = await creditsUsed();
    const res = await generate('slow one [slow:8000]');
    expect(res.status).toBe(504);
    expect(res.body.error.code).toBe('provider_timeout');
    expect(await creditsUsed()).toBe(before);
    const row = await t.gateway.database.db
      .selectFrom('generations')
      .select(['status', 'error_code'])
      .where('key_id', '=', keyId)
      .orderBy('created_at', 'desc')
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ status: 'failed', error_code: 'provider_timeout' });
  });

  it('a client that goes away stops the upstream polling and keeps paying for the task it had submitted', async () => {
    const before = await creditsUsed();
    const prompt = 'endless [pending:100000]';
    // Tests here run one at a time, so every poll the fake sees now belongs to this request.
    const polls = () => fake.requests.filter((r) => r.action === 'CVSync2AsyncGetResult').length;
    const req = http.request(`${t.gateway.url}/images/generate`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
    });
    req.on('error', () => undefined);
    req.end(JSON.stringify({ prompt, model: 'jimeng-4.0' }));
    const startedAt = fake.requests.length;
    while (fake.requests.length - startedAt < 5) await new Promise((resolve) => setTimeout(resolve, 10));
    req.destroy();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const afterAbort = polls();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(polls()).toBe(afterAbort);
    // The upstream accepted the task and bills it: the disconnect keeps its credits, like a cancel (issue #29).
    const row = await t.gateway.database.db
      .selectFrom('generations')
      .select(['status', 'credits', 'charged_credits'])
      .where('key_id', '=', keyId)
      .orderBy('created_at', 'desc')
      .executeTakeFirstOrThrow();
    expect({ status: row.status, charged: Number(row.charged_credits) }).toEqual({ status: 'canceled', charged: Number(row.credits) });
    expect(await creditsUsed()).toBe(before + Number(row.credits));
  });

  it('a client disconnect is logged once at info with the generation id and what was charged, never as an error', async () => {
    const from = t.logs.length;
    const req = http.request(`${t.gateway.url}/images/generate`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
    });
    req.on('error', () => undefined);
    req.end(JSON.stringify({ prompt: 'left waiting [pending:100000]', model: 'jimeng-4.0' }));
    const row = () =>
      t.gateway.database.db.selectFrom('generations').select(['id', 'status', 'charged_credits']).where('request', 'like', '%left waiting%').executeTakeFirst();
    await until(async () => (await row()) !== undefined && fake.requests.some((r) => r.action === 'CVSync2AsyncGetResult'), 'the generation polling upstream');
    req.destroy();
    await until(async () => (await row())?.status === 'canceled', 'the generation canceled by the disconnect');
    const { id, charged_credits: charged } = (await row())!;
    const lines = () => t.logs.slice(from).map((line) => JSON.parse(line) as { level: number; msg: string; generation_id?: string; charged_credits?: number });
    await until(() => lines().some((line) => (line.generation_id === id && line.level === 30) || line.level >= 50), 'a log line of the disconnect');
    expect(lines().filter((line) => line.level >= 50)).toEqual([]);
    expect(lines().filter((line) => line.generation_id === id)).toEqual([
      expect.objectContaining({ level: 30, msg: 'client disconnected before the answer', generation_id: id, charged_credits: Number(charged) }),
    ]);
    expect(Number(charged)).toBeGreaterThan(0);
  });

  it("n=3 failing part-way: not charged, no call sent after the failure, the images made listed as the operator's loss", async () => {
    const before = await creditsUsed();
    const prompt = 'three lanterns [fail-from:3] [pending:20]';
    const res = await generate(prompt, { n: 3 });
    expect([res.status, res.body.error?.code]).toEqual([502, 'provider_error']);
    expect(await creditsUsed()).toBe(before);
    // The two images made upstream are not thrown away silently: listed on the generation, with the reason.
    const row = await t.gateway.database.db
      .selectFrom('generations')
      .select(['status', 'charged_credits', 'unbilled_images', 'unbilled_reason'])
      .where('request', 'like', '%three lanterns%')
      .executeTakeFirstOrThrow();
    expect({ ...row, charged_credits: Number(row.charged_credits) }).toEqual({
      status: 'failed',
      charged_credits: 0,
      unbilled_images: 2,
      unbilled_reason: 'partial_failure',
    });
    expect((await t.internal.send('get', '/metrics')).text).toMatch(/creative_gateway_unbilled_images_total\{reason="partial_failure"\} [1-9]/);
  });

  it('a wrong secret is refused by the upstream (SignatureDoesNotMatch) -> 502', async () => {
    const other = await startTestGateway({
      VOLC_ACCESS_KEY_ID: credentials.accessKeyId,
      VOLC_SECRET_ACCESS_KEY: 'not-the-secret',
      VOLC_VISUAL_ENDPOINT: fake.url,
    });
    try {
      const { key: otherKey } = await other.createKey({ allowed_providers: ['jimeng'] });
      const res = await other.api.client(otherKey, { prompt: 'a cat', model: 'jimeng-4.0' });
      expect(res.status).toBe(502);
      expect(res.body.error.message).toContain('SignatureDoesNotMatch');
    } finally {
      await other.close();
    }
  });

  it('503 provider_unavailable naming the variables when Ark is not configured', async () => {
    const res = await generate('needs ark', { model: 'jimeng-4.5', size: '2048x2048' });
    expect(res.status).toBe(503);
    expect(res.body.error.message).toContain('ARK_API_KEY');
  });
});
