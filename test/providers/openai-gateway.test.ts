import { toFile } from 'openai';
import { type FakeOpenAIImages, startFakeOpenAIImages } from '../fakes/fake-openai-images';
import { expectOnePng, openaiClient } from '../helpers/openai-sdk';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { testPng } from '../helpers/test-images';
import { until } from '../helpers/until';

/**
 * The `openai` wire format through the gateway: its environment account and an API channel, each a fake
 * OpenAI Images API that refuses what the real one refuses (test/fakes/fake-openai-images.ts), driven by
 * the official `openai` SDK as a client would.
 */
describe('OpenAI GPT image models and dall-e-3 through the gateway (fake OpenAI)', () => {
  const ENV_KEY = 'sk-openai-env';
  const API_KEY = 'sk-openai-api';
  let environment: FakeOpenAIImages;
  let second: FakeOpenAIImages;
  let t: TestGateway;
  let key: string;
  let keyId: string;
  let channelId: string;

  beforeAll(async () => {
    environment = await startFakeOpenAIImages({ apiKey: ENV_KEY });
    second = await startFakeOpenAIImages({ apiKey: API_KEY });
    t = await startTestGateway({ OPENAI_API_KEY: ENV_KEY, OPENAI_BASE_URL: `${environment.url}/v1`, PROVIDER_OPENAI_RETRY_BASE_DELAY_MS: '5' });
    ({ key, id: keyId } = await t.createKey({ allowed_providers: ['openai'], credits_quota: 100_000 }));
  });
  afterAll(async () => {
    await t.close();
    await environment.close();
    await second.close();
  });

  const creditsUsed = () => t.api.creditsUsed(keyId);

  it('is the read-only environment channel chn_envOpenai; /v1/models prices gpt-image-1 by quality and size', async () => {
    const channel = await t.api.admin('get', '/admin/channels/chn_envOpenai');
    expect(channel.status).toBe(200);
    expect(channel.body).toMatchObject({ provider: 'openai', transport: 'openai', source: 'environment', base_url: `${environment.url}/v1` });
    const model = await t.api.send('get', '/v1/models/gpt-image-1', { headers: { Authorization: `Bearer ${key}` } });
    expect(model.status).toBe(200);
    expect(model.body.price_table).toEqual(
      expect.arrayContaining([
        // OpenAI's $0.011 and $0.25 at a cent a credit, rounded up (docs/operators/pricing.md).
        { quality: 'low', max_pixels: 1024 * 1024, credits: 2 },
        { quality: 'high', max_pixels: 1536 * 1024, credits: 25 },
      ]),
    );
  });

  it("an answer with more images than n (n + 2) delivers n, charged for n; the images beyond are the operator's loss", async () => {
    const before = await creditsUsed();
    const res = await t.api.client(key, { prompt: 'two asked, four answered [extra-images:2]', model: 'gpt-image-1', n: 2, size: '1024x1024', quality: 'low' });
    expect(res.status).toBe(200);
    expect(res.body.data).toHaveLength(2);
    // Charged for the n images delivered, at the request's price per image.
    expect(res.body.usage).toMatchObject({ images: 2, credits_charged: 2 * res.body.usage.credits_per_image });
    expect((await creditsUsed()) - before).toBe(res.body.usage.credits_charged);
    const row = await t.gateway.database.db
      .selectFrom('generations')
      .selectAll()
      .where('id', '=', res.body.id as string)
      .executeTakeFirstOrThrow();
    expect(Number(row.unbilled_images)).toBe(2);
    const stored = await t.gateway.database.db
      .selectFrom('stored_images')
      .select('position')
      .where('generation_id', '=', res.body.id as string)
      .execute();
    expect(stored.map((image) => image.position).sort()).toEqual([0, 1]);
  });

  it('SDK generate on gpt-image-1: n images in one call, no response_format or seed sent, charged the quality and size row', async () => {
    const before = await creditsUsed();
    const calls = environment.requests.length;
    const answer = await openaiClient(t, key).images.generate({
      model: 'gpt-image-1',
      prompt: 'two lighthouses',
      n: 2,
      size: '1536x1024',
      quality: 'low',
      response_format: 'b64_json',
    });
    expect(answer.data).toHaveLength(2);
    expect(environment.requests.slice(calls)).toEqual([
      expect.objectContaining({
        endpoint: 'generations',
        fields: { model: 'gpt-image-1', prompt: 'two lighthouses', n: 2, size: '1536x1024', quality: 'low' },
      }),
    ]);
    // $0.016 each at a cent a credit, rounded up per image.
    expect((await creditsUsed()) - before).toBe(2 * 2);
  });

  it('dall-e-3 takes one image per call: n = 2 is two calls of n = 1, each asking for b64_json', async () => {
    const calls = environment.requests.length;
    const res = await t.api.send('post', '/images/generate', {
      body: { prompt: 'a quiet harbour', model: 'dall-e-3', n: 2, size: '1792x1024', quality: 'hd', response_format: 'b64_json' },
      headers: { Authorization: `Bearer ${key}` },
    });
    expect(res.status).toBe(200);
    expect(res.body.usage).toMatchObject({ images: 2, credits_charged: 2 * 12 });
    const sent = environment.requests.slice(calls);
    expect(sent).toHaveLength(2);
    for (const request of sent)
      expect(request.fields).toEqual({ model: 'dall-e-3', prompt: 'a quiet harbour', n: 1, size: '1792x1024', quality: 'hd', response_format: 'b64_json' });
  });

  it("the usage tokens OpenAI reports are recorded on the attempt, in OpenAI's shape; a model that reports none records null", async () => {
    const headers = { Authorization: `Bearer ${key}` };
    const gpt = await t.api.send('post', '/images/generate', {
      body: { prompt: 'three tall lighthouses', model: 'gpt-image-1', n: 2, size: '1024x1024', quality: 'low', response_format: 'b64_json' },
      headers,
    });
    expect(gpt.status).toBe(200);
    const gptAttempts = (await t.internal.service('get', `/api/v1/creative/generations/${gpt.body.id}`)).body.attempts;
    // The fake counts 3 text tokens (words) and 272 output tokens an image.
    expect(gptAttempts).toEqual([
      expect.objectContaining({
        outcome: 'succeeded',
        upstream_usage: {
          input_tokens: 3,
          input_tokens_details: { image_tokens: 0, text_tokens: 3 },
          output_tokens: 544,
          output_tokens_details: { image_tokens: 544, text_tokens: 0 },
          total_tokens: 547,
        },
      }),
    ]);
    const dalle = await t.api.send('post', '/images/generate', {
      body: { prompt: 'a harbour', model: 'dall-e-3', size: '1024x1024', response_format: 'b64_json' },
      headers,
    });
    expect(dalle.status).toBe(200);
    const dalleAttempts = (await t.internal.service('get', `/api/v1/creative/generations/${dalle.body.id}`)).body.attempts;
    expect(dalleAttempts).toEqual([expect.objectContaining({ outcome: 'succeeded', upstream_usage: null })]);
  });

  it('a size the model does not take is refused before anything is charged or sent', async () => {
    const before = await creditsUsed();
    const calls = environment.requests.length;
    const res = await t.api.send('post', '/images/generate', {
      body: { prompt: 'x', model: 'gpt-image-1', size: '1024x768' },
      headers: { Authorization: `Bearer ${key}` },
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'size' });
    expect(environment.requests.length).toBe(calls);
    expect(await creditsUsed()).toBe(before);
  });

  it("SDK edit with a mask on gpt-image-1: multipart image[] and mask parts reach OpenAI's /images/edits", async () => {
    const calls = environment.requests.length;
    const answer = await openaiClient(t, key).images.edit({
      model: 'gpt-image-1',
      prompt: 'paint the sky',
      image: await toFile(testPng(32, 32), 'scene.png', { type: 'image/png' }),
      mask: await toFile(testPng(32, 32, { alpha: true }), 'mask.png', { type: 'image/png' }),
      size: '1024x1024',
      quality: 'medium',
      response_format: 'b64_json',
    });
    expectOnePng(answer);
    const [edit] = environment.requests.slice(calls);
    expect(edit).toMatchObject({ endpoint: 'edits', fields: { model: 'gpt-image-1', prompt: 'paint the sky', n: '1', size: '1024x1024', quality: 'medium' } });
    expect(edit!.files.map((file) => [file.field, file.width, file.height])).toEqual([
      ['image[]', 32, 32],
      ['mask', 32, 32],
    ]);
  });

  it("a moderation refusal is the client's content: 400, nothing charged, the channel stays enabled", async () => {
    const before = await creditsUsed();
    const res = await t.api.send('post', '/images/generate', {
      body: { prompt: 'forbidden [fail:moderation_blocked]', model: 'gpt-image-1', size: '1024x1024' },
      headers: { Authorization: `Bearer ${key}` },
    });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('content_policy_violation');
    expect(await creditsUsed()).toBe(before);
    expect((await t.api.admin('get', '/admin/channels/chn_envOpenai')).body.status).toBe('enabled');
  });

  it('asynchronous: queued, then succeeded', async () => {
    const res = await t.api.send('post', '/images/generate', {
      body: { prompt: 'a field', model: 'gpt-image-1-mini', size: '1024x1536' },
      headers: { Authorization: `Bearer ${key}`, Prefer: 'respond-async' },
    });
    expect(res.status).toBe(202);
    const status = async () => (await t.api.send('get', `/generations/${res.body.id}`, { headers: { Authorization: `Bearer ${key}` } })).body.status as string;
    await until(async () => (await status()) === 'succeeded', 'the generation to succeed');
  });

  it("an API channel over `openai`: when the environment account's key is revoked, the request fails over to it", async () => {
    const created = await t.api.admin('post', '/admin/channels', {
      name: 'openai second account',
      provider: 'openai',
      transport: 'openai',
      base_url: `${second.url}/v1`,
      models: [{ model: 'gpt-image-1' }],
      credentials: { api_key: API_KEY },
      priority: -1,
    });
    expect(created.status).toBe(201);
    channelId = created.body.id as string;
    expect(created.body.credentials_hint).not.toContain(API_KEY);
    environment.setApiKey('sk-rotated-elsewhere');
    const secondCalls = second.requests.length;
    const res = await t.api.send('post', '/images/generate', {
      body: { prompt: 'still served', model: 'gpt-image-1', size: '1024x1024', response_format: 'b64_json' },
      headers: { Authorization: `Bearer ${key}` },
    });
    expect(res.status).toBe(200);
    expect(second.requests.length - secondCalls).toBe(1);
    expect((await t.api.admin('get', `/admin/channels/${channelId}`)).body.status).toBe('enabled');
  });
});
