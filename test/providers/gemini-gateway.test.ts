import { toFile } from 'openai';
import { type FakeGemini, startFakeGemini } from '../fakes/fake-gemini';
import { expectOnePng, openaiClient } from '../helpers/openai-sdk';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { dataUri, testPng } from '../helpers/test-images';
import { until } from '../helpers/until';

/**
 * The `gemini` wire format through the gateway, to the fake Gemini API (test/fakes/fake-gemini.ts):
 * its environment account (GEMINI_API_KEY) and API channels, synchronous and asynchronous
 * generations, reference images on the native and the OpenAI edits paths, price tiers, a client's
 * cancel, failover between channels, and one test per family of its error table
 * (src/providers/gemini/gemini-errors.ts) that fails without that row. Both engines (the providers
 * folder runs on SQLite and on PostgreSQL + Redis).
 */
const ENV_KEY = 'gemini-env-key-0001';
const API_KEY = 'gemini-api-key-0002';

type ImageConfig = { aspectRatio: string; imageSize?: string };
const imageConfigOf = (call: { body: Record<string, unknown> }) => (call.body.generationConfig as { imageConfig: ImageConfig }).imageConfig;
const partsOf = (call: { body: Record<string, unknown> }) => (call.body.contents as Array<{ parts: Array<Record<string, unknown>> }>)[0]!.parts;

describe('Gemini through the gateway: its environment account (GEMINI_API_KEY)', () => {
  let gemini: FakeGemini;
  let t: TestGateway;
  let key: { id: string; key: string };

  beforeAll(async () => {
    gemini = await startFakeGemini({ apiKey: ENV_KEY });
    t = await startTestGateway({ GEMINI_API_KEY: ENV_KEY, GEMINI_BASE_URL: gemini.url });
    key = await t.createKey({ allowed_providers: ['google'], credits_quota: 10_000 });
  });
  afterAll(async () => {
    gemini.releaseHeld();
    await t.close();
    await gemini.close();
  });

  const auth = () => ({ Authorization: `Bearer ${key.key}` });
  const creditsUsed = () => t.api.creditsUsed(key.id);
  const callsOf = (prompt: string) => gemini.calls.filter((c) => partsOf(c)[0]!.text === prompt);

  it('synchronous, n = 2 at 4K on 3 Pro: two calls (no n, no seed), each one inline image, stored; charged at the 4K tier', async () => {
    const before = await creditsUsed();
    const prompt = 'a gemini lighthouse';
    const res = await t.api.client(key.key, { prompt, model: 'gemini-3-pro-image', size: '5504x3072', n: 2, seed: 9 });
    expect(res.status).toBe(200);
    expect(res.body.data).toHaveLength(2);
    for (const image of res.body.data as Array<{ url: string }>) expect(image.url).toContain('/images/img_');
    expect(res.body.usage).toMatchObject({ images: 2, credits_per_image: 24, credits_charged: 48 });
    expect(callsOf(prompt)).toHaveLength(2);
    for (const call of callsOf(prompt)) {
      expect(call.model).toBe('gemini-3-pro-image');
      expect(call.body).toEqual({
        contents: [{ role: 'user', parts: [{ text: prompt }] }],
        generationConfig: { responseModalities: ['IMAGE'], imageConfig: { aspectRatio: '16:9', imageSize: '4K' } },
      });
    }
    expect((await creditsUsed()) - before).toBe(48);
  });

  it('the price follows the size tier: 3 Pro at 1K and 2K, 3.1 Flash at 1K, 2K and 4K', async () => {
    const cases: Array<[string, string, number, ImageConfig]> = [
      ['gemini-3-pro-image', '1024x1024', 14, { aspectRatio: '1:1', imageSize: '1K' }],
      ['gemini-3-pro-image', '2528x1696', 14, { aspectRatio: '3:2', imageSize: '2K' }],
      ['gemini-3.1-flash-image', '384x3072', 7, { aspectRatio: '1:8', imageSize: '1K' }],
      ['gemini-3.1-flash-image', '4096x1024', 11, { aspectRatio: '4:1', imageSize: '2K' }],
      ['gemini-3.1-flash-image', '3712x4608', 16, { aspectRatio: '4:5', imageSize: '4K' }],
    ];
    for (const [model, size, credits, imageConfig] of cases) {
      const prompt = `tier ${model} ${size}`;
      const res = await t.api.client(key.key, { prompt, model, size, response_format: 'b64_json' });
      expect({ size, status: res.status, credits: res.body.usage?.credits_per_image }).toEqual({ size, status: 200, credits });
      expect(imageConfigOf(callsOf(prompt)[0]!)).toEqual(imageConfig);
    }
  });

  it('3 Pro thinks: its thought parts (interim drafts) are never delivered; the final image is, at the size its bytes say', async () => {
    const prompt = 'a thoughtful harbour';
    const res = await t.api.client(key.key, { prompt, model: 'gemini-3-pro-image', size: '1376x768', response_format: 'b64_json' });
    expect(res.status).toBe(200);
    expect(res.body.data).toHaveLength(1);
    const bytes = Buffer.from(res.body.data[0].b64_json as string, 'base64');
    expect({ width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) }).toEqual({ width: 1376, height: 768 });
    expect(res.body.data[0]).toMatchObject({ width: 1376, height: 768 });
  });

  it('the OpenAI-compatible path, b64_json: the inline bytes come back as they were', async () => {
    const res = await t.api.client(
      key.key,
      { prompt: 'a gemini harbour', model: 'gemini-2.5-flash-image', size: '1344x768', response_format: 'b64_json' },
      '/v1/images/generations',
    );
    expect(res.status).toBe(200);
    expect(
      Buffer.from(res.body.data[0].b64_json as string, 'base64')
        .subarray(1, 4)
        .toString(),
    ).toBe('PNG');
    expect(imageConfigOf(callsOf('a gemini harbour')[0]!)).toEqual({ aspectRatio: '16:9' });
  });

  it('asynchronous: queued, then succeeded', async () => {
    const prompt = 'a gemini field';
    const res = await t.api.send('post', '/images/generate', {
      body: { prompt, model: 'gemini-2.5-flash-image', size: '1024x1024' },
      headers: { ...auth(), Prefer: 'respond-async' },
    });
    expect(res.status).toBe(202);
    const read = async () => (await t.api.send('get', `/generations/${res.body.id}`, { headers: auth() })).body as { status: string; data: unknown[] };
    await until(async () => (await read()).status === 'succeeded', 'the gemini generation to succeed');
    expect((await read()).data).toHaveLength(1);
    expect(callsOf(prompt)).toHaveLength(1);
  });

  it("a size outside the model's aspect-ratio × tier table is refused with 400 before anything is charged or sent", async () => {
    const used = await creditsUsed();
    const calls = gemini.calls.length;
    for (const [model, size] of [
      ['gemini-2.5-flash-image', '1024x768'],
      ['gemini-2.5-flash-image', '2048x2048'],
      ['gemini-3-pro-image', '1024x1020'],
      ['gemini-3-pro-image', '384x3072'],
    ] as const) {
      const res = await t.api.client(key.key, { prompt: `no ${size}`, model, size });
      expect({ model, size, status: res.status, error: res.body.error }).toMatchObject({
        model,
        size,
        status: 400,
        error: { code: 'invalid_request', param: 'size' },
      });
    }
    expect(gemini.calls.length).toBe(calls);
    expect(await creditsUsed()).toBe(used);
  });

  it('/v1/models publishes the enumerated sizes, the input limits and the price table', async () => {
    const res = await t.api.send('get', '/v1/models/gemini-3-pro-image', { headers: auth() });
    expect(res.status).toBe(200);
    expect(res.body.size_bounds.allowed_sizes).toEqual(expect.arrayContaining(['1024x1024', '2752x1536', '6336x2688']));
    expect(res.body.size_bounds.allowed_sizes).toHaveLength(30);
    expect(res.body.input_limits).toMatchObject({ max_images: 14, mask: false, delivery: 'inline' });
    expect(res.body.price_table).toEqual([
      { tier: '1K', max_pixels: 1200 * 896, credits: 14 },
      { tier: '2K', max_pixels: 2400 * 1792, credits: 14 },
      { tier: '4K', credits: 24 },
    ]);
  });

  it('reference images (native `images`): inline_data parts after the prompt, the exact bytes, in order', async () => {
    const [first, second] = [testPng(40, 30, { shade: 3 }), testPng(16, 16, { shade: 250 })];
    const prompt = 'put them together';
    const res = await t.api.client(key.key, { prompt, model: 'gemini-3-pro-image', size: '1024x1024', images: [dataUri(first), dataUri(second)] });
    expect(res.status).toBe(200);
    const [call] = callsOf(prompt);
    expect(partsOf(call!)).toEqual([
      { text: prompt },
      { inline_data: { mime_type: 'image/png', data: first.toString('base64') } },
      { inline_data: { mime_type: 'image/png', data: second.toString('base64') } },
    ]);
    expect(call!.images.map((image) => [image?.format, image?.width, image?.height])).toEqual([
      ['png', 40, 30],
      ['png', 16, 16],
    ]);
  });

  it('POST /v1/images/edits with the official openai SDK: the uploads reach Gemini as inline parts, byte for byte', async () => {
    const [first, second] = [testPng(32, 48, { shade: 1 }), testPng(20, 20, { shade: 200 })];
    const prompt = 'sdk: a gemini edit';
    const answer = await openaiClient(t, key.key).images.edit({
      image: [await toFile(first, 'first.png', { type: 'image/png' }), await toFile(second, 'second.png', { type: 'image/png' })],
      prompt,
      model: 'gemini-2.5-flash-image',
      size: '1024x1024',
      response_format: 'b64_json',
    });
    expectOnePng(answer);
    const [call] = callsOf(prompt);
    expect(call!.images).toHaveLength(2);
    expect([call!.images[0]!.bytes.equals(first), call!.images[1]!.bytes.equals(second)]).toEqual([true, true]);
  });

  it('more reference images than the model takes, or a mask: refused before anything is sent', async () => {
    const calls = gemini.calls.length;
    const four = Array.from({ length: 4 }, (_, i) => dataUri(testPng(8, 8, { shade: i })));
    const tooMany = await t.api.client(key.key, { prompt: 'four references', model: 'gemini-2.5-flash-image', size: '1024x1024', images: four });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.error.param).toBe('images');
    const masked = await t.api.client(key.key, {
      prompt: 'masked',
      model: 'gemini-3-pro-image',
      size: '1024x1024',
      images: [dataUri(testPng(8, 8))],
      mask: dataUri(testPng(8, 8, { alpha: true })),
    });
    expect(masked.status).toBe(400);
    expect(masked.body.error.param).toBe('mask');
    expect(gemini.calls.length).toBe(calls);
  });

  it("a client's cancel of a running asynchronous generation: Gemini has no cancel, so the calls already sent are charged and nothing more is sent", async () => {
    const prompt = 'cancel me at gemini [hold]';
    const before = await creditsUsed();
    const res = await t.api.send('post', '/images/generate', {
      body: { prompt, model: 'gemini-3.1-flash-image', size: '1024x1024', n: 2 },
      headers: { ...auth(), Prefer: 'respond-async' },
    });
    expect(res.status).toBe(202);
    await until(() => callsOf(prompt).length === 2, 'both calls to reach Gemini');
    const cancel = await t.api.send('post', `/generations/${res.body.id}/cancel`, { headers: auth() });
    expect(cancel.status).toBe(200);
    expect(cancel.body.status).toBe('canceled');
    const read = await t.api.send('get', `/generations/${res.body.id}`, { headers: auth() });
    expect(read.body).toMatchObject({ status: 'canceled', usage: { credits_charged: 14 } });
    gemini.releaseHeld();
    expect(callsOf(prompt)).toHaveLength(2);
    expect((await creditsUsed()) - before).toBe(14);
  });
});

describe('Gemini through the gateway: API channels, failover, and its error table', () => {
  let healthy: FakeGemini;
  let other: FakeGemini;
  let t: TestGateway;
  let key: { id: string; key: string };
  const created: string[] = [];

  beforeAll(async () => {
    healthy = await startFakeGemini({ apiKey: API_KEY });
    other = await startFakeGemini({ apiKey: API_KEY });
    t = await startTestGateway({
      MODEL_CATALOG: JSON.stringify({
        // An id the account does not have (Google's 404), sized by the 2.5 Flash Image table.
        models: [
          {
            model: 'gemini-retired',
            provider: 'google',
            upstream_model: 'gemini-2.0-flash-preview-image-generation',
            upstream_family: 'gemini-2.5-flash-image',
            credits_per_image: 4,
            default_size: '1024x1024',
          },
        ],
      }),
      PROVIDER_GOOGLE_RETRY_BASE_DELAY_MS: '5',
      // The default queue timeout (2 s), shorter than Google's RetryInfo of 7 s.
      CHANNEL_QUEUE_TIMEOUT_MS: '2000',
    });
    key = await t.createKey({ allowed_providers: ['google'], credits_quota: 100_000 });
  });
  afterAll(async () => {
    await t.close();
    await healthy.close();
    await other.close();
  });
  afterEach(async () => {
    for (const id of created.splice(0)) await t.api.admin('delete', `/admin/channels/${id}`);
    healthy.setOutage(undefined);
    other.setOutage(undefined);
    healthy.setApiKey(API_KEY);
  });

  const channel = async (fake: FakeGemini, extra: Record<string, unknown> = {}) => {
    const res = await t.api.admin('post', '/admin/channels', {
      name: `gemini ${created.length}`,
      provider: 'google',
      transport: 'gemini',
      base_url: fake.url,
      models: [{ model: 'gemini-2.5-flash-image' }, { model: 'gemini-3-pro-image' }, { model: 'gemini-retired' }],
      credentials: { api_key: API_KEY },
      ...extra,
    });
    if (res.status !== 201) throw new Error(`createChannel: ${res.status} ${res.text}`);
    created.push(res.body.id as string);
    return res.body as { id: string; transport: string; credentials_hint: string };
  };
  const generate = (prompt: string, model = 'gemini-2.5-flash-image') => t.api.client(key.key, { prompt, model, size: '1024x1024' });
  const attemptsOf = async (id: string) =>
    (await t.internal.service('get', `/api/v1/creative/generations/${id}`)).body.attempts as Array<Record<string, unknown>>;
  const channelOf = async (id: string) => (await t.api.admin('get', `/admin/channels/${id}`)).body;
  const callsOf = (fake: FakeGemini, prompt: string) => fake.calls.filter((c) => partsOf(c)[0]!.text === prompt).length;
  const auth = () => ({ Authorization: `Bearer ${key.key}` });

  it('an API channel serves the models it lists, synchronously and asynchronously; its key is never shown', async () => {
    const created = await channel(healthy);
    expect(created).toMatchObject({ transport: 'gemini' });
    expect(created.credentials_hint).not.toContain(API_KEY);
    expect((await generate('over the API channel')).status).toBe(200);
    const res = await t.api.send('post', '/images/generate', {
      body: { prompt: 'async over the API channel', model: 'gemini-3-pro-image', size: '2048x2048' },
      headers: { ...auth(), Prefer: 'respond-async' },
    });
    expect(res.status).toBe(202);
    await until(
      async () => (await t.api.send('get', `/generations/${res.body.id}`, { headers: auth() })).body.status === 'succeeded',
      'the async generation over the API channel',
    );
    expect(healthy.calls.filter((c) => c.apiKey === API_KEY).length).toBeGreaterThanOrEqual(2);
  });

  it('failover: a channel whose account is down (503 UNAVAILABLE) is retried, then the request goes to the next channel', async () => {
    const first = await channel(other, { priority: 10 });
    const second = await channel(healthy);
    other.setOutage({ status: 'UNAVAILABLE', code: 503 });
    const res = await generate('fail over to the second channel');
    expect(res.status).toBe(200);
    const attempts = await attemptsOf(res.body.id as string);
    expect(attempts.at(-1)).toMatchObject({ channel_id: second.id, outcome: 'succeeded' });
    expect(attempts.slice(0, -1).every((a) => a.channel_id === first.id && a.outcome === 'failed_over')).toBe(true);
    expect(callsOf(healthy, 'fail over to the second channel')).toBe(1);
  });

  it("content (row 1): a blocked prompt or a SAFETY / PROHIBITED_CONTENT finish is the client's 400, never sent to another channel, never counted against the channel", async () => {
    const first = await channel(other, { priority: 10 });
    await channel(healthy);
    const prompts = [
      'blocked [block:SAFETY]',
      'blocked [block:OTHER]',
      'stopped [finish:SAFETY]',
      'stopped [finish:PROHIBITED_CONTENT]',
      'blocked [block:PROHIBITED_CONTENT]',
      'blocked [block:BLOCKLIST]',
    ];
    for (const prompt of prompts) {
      const res = await generate(prompt);
      expect({ prompt, status: res.status, code: res.body.error?.code }).toEqual({ prompt, status: 400, code: 'content_policy_violation' });
      expect(callsOf(healthy, prompt)).toBe(0);
    }
    // Six refusals in a row (the breaker opens at five provider failures): the channel still serves.
    expect(await channelOf(first.id)).toMatchObject({ status: 'enabled' });
    const after = await generate('after the refusals');
    expect(after.status).toBe(200);
    expect((await attemptsOf(after.body.id as string)).map((a) => a.channel_id)).toEqual([first.id]);
  });

  it('output (row 2): IMAGE_SAFETY (made, then withheld) is 422 output_moderated, not sent elsewhere', async () => {
    await channel(other, { priority: 10 });
    await channel(healthy);
    const res = await generate('withheld [finish:IMAGE_SAFETY]');
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('output_moderated');
    expect(callsOf(healthy, 'withheld [finish:IMAGE_SAFETY]')).toBe(0);
  });

  it("account (row 3): an invalid key (400 API_KEY_INVALID) disables the channel at once, with Google's reason, and the request goes to the next", async () => {
    const first = await channel(other, { priority: 10, credentials: { api_key: 'revoked-gemini-key' } });
    await channel(healthy);
    const refusedBefore = other.answered.filter((a) => a.status === 400).length;
    const res = await generate('after the key was revoked');
    expect(res.status).toBe(200);
    expect(other.answered.filter((a) => a.status === 400).length - refusedBefore).toBe(1);
    expect((await attemptsOf(res.body.id as string)).map((a) => [a.channel_id, a.outcome])).toEqual([
      [first.id, 'failed_over'],
      [expect.any(String), 'succeeded'],
    ]);
    const disabled = await channelOf(first.id);
    expect(disabled.status).toBe('auto_disabled');
    expect(disabled.disabled_reason).toContain('API key not valid');
    expect(disabled.disabled_reason).not.toContain('revoked-gemini-key');
  });

  it('configuration (row 4): a model id the account does not have (404 NOT_FOUND) goes elsewhere and does not open the breaker', async () => {
    const only = await channel(healthy);
    for (let i = 0; i < 6; i += 1) {
      const res = await generate(`retired ${i}`, 'gemini-retired');
      expect(res.status).not.toBe(200);
    }
    expect(healthy.answered.filter((a) => a.model === 'gemini-2.0-flash-preview-image-generation')).toEqual(
      Array.from({ length: 6 }, () => ({ model: 'gemini-2.0-flash-preview-image-generation', status: 404 })),
    );
    const after = await generate('after the unknown model');
    expect(after.status).toBe(200);
    expect((await attemptsOf(after.body.id as string)).map((a) => a.channel_id)).toEqual([only.id]);
  });

  it('transient (row 6): 503 UNAVAILABLE once is retried on the same channel', async () => {
    await channel(healthy);
    const prompt = 'overloaded once [unavailable:1]';
    const res = await generate(prompt);
    expect(res.status).toBe(200);
    expect(callsOf(healthy, prompt)).toBe(2);
  });

  it('account (row 5): an exhausted per-day quota (429 with a QuotaFailure whose quotaId is …PerDay…) is one call, not three, and disables the channel until a probe passes', async () => {
    const only = await channel(healthy);
    const prompt = 'out of today [quota-day]';
    const res = await generate(prompt);
    expect(res.status).toBe(502);
    expect(res.body.error.code).toBe('provider_error');
    expect(callsOf(healthy, prompt)).toBe(1);
    const disabled = await channelOf(only.id);
    expect(disabled.status).toBe('auto_disabled');
    expect(disabled.disabled_reason).toContain('per-day quota');
  });

  it("busy (row 5): 429 RESOURCE_EXHAUSTED is 503 provider_busy with Google's RetryInfo (7s) as Retry-After 7, at once, not a provider failure", async () => {
    const only = await channel(healthy);
    const prompt = 'rate limited [busy]';
    const res = await generate(prompt);
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe('provider_busy');
    // The channel cools down past the request's queue deadline: the answer is not held in the queue
    // (which would leave 7 s minus the wait), it passes Google's delay on.
    expect(res.headers['retry-after']).toBe('7');
    expect(callsOf(healthy, prompt)).toBe(1);
    expect(await channelOf(only.id)).toMatchObject({ status: 'enabled' });
  });
});
