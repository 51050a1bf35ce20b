import OpenAI from 'openai';
import { openaiClient } from '../helpers/openai-sdk';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';

describe('POST /v1/images/generations (createImageOpenAI) with the official openai client', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  const client = (apiKey: string) => openaiClient(t, apiKey);

  it('generates through the SDK: b64_json and url, unknown OpenAI fields ignored, credits charged', async () => {
    const { id, key } = await t.createKey({ credits_quota: 10 });
    const b64 = await client(key).images.generate({
      model: 'local-1',
      prompt: 'a lighthouse at dawn',
      n: 2,
      size: '256x256',
      response_format: 'b64_json',
      quality: 'high',
      style: 'vivid',
      user: 'end-user-42',
    } as OpenAI.Images.ImageGenerateParamsNonStreaming);
    expect(b64.data).toHaveLength(2);
    expect(Buffer.from(b64.data![0]!.b64_json!, 'base64').subarray(1, 4).toString()).toBe('PNG');
    expect(b64.data![0]!.revised_prompt).toBe('a lighthouse at dawn');
    const url = await client(key).images.generate({ model: 'local-1', prompt: 'a boat', size: 'auto' as '256x256' });
    // The gateway's own URL, fetched without the key, as an <img> tag would.
    const image = await fetch(url.data![0]!.url!);
    expect(image.headers.get('content-type')).toBe('image/png');
    expect(
      Buffer.from(await image.arrayBuffer())
        .subarray(1, 4)
        .toString(),
    ).toBe('PNG');
    expect(await t.api.creditsUsed(id)).toBe(3);
  });

  it('answers in the OpenAI shape over raw HTTP too, validated against the spec', async () => {
    const { key } = await t.createKey();
    const res = await t.api.client(
      key,
      { model: 'local-1', prompt: 'raw', size: '32x32', response_format: 'b64_json', moderation: 'low' },
      '/v1/images/generations',
    );
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['created', 'data']);
  });

  it("our errors become the SDK's typed errors", async () => {
    const { key } = await t.createKey({ credits_quota: 1, rate_limit_rpm: 2, allowed_providers: ['local'] });
    const call = (apiKey: string, params: Partial<OpenAI.Images.ImageGenerateParamsNonStreaming> = {}) =>
      client(apiKey).images.generate({ model: 'local-1', prompt: 'x', size: '32x32' as '256x256', ...params } as OpenAI.Images.ImageGenerateParamsNonStreaming);

    await expect(call('hyai_not-a-key')).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    await expect(call(key, { model: 'nope' })).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(call(key, { model: 'jimeng-4.5' })).rejects.toBeInstanceOf(OpenAI.PermissionDeniedError);
    const badRequest = await call(key, { n: 9 }).catch((e: unknown) => e);
    expect(badRequest).toBeInstanceOf(OpenAI.BadRequestError);
    expect((badRequest as InstanceType<typeof OpenAI.BadRequestError>).code).toBe('invalid_request');
    expect((badRequest as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('n');

    expect((await call(key)).data).toHaveLength(1);
    const quota = await call(key).catch((e: unknown) => e);
    expect(quota).toBeInstanceOf(OpenAI.APIError);
    expect((quota as InstanceType<typeof OpenAI.APIError>).status).toBe(402);
    expect((quota as InstanceType<typeof OpenAI.APIError>).code).toBe('quota_exceeded');
    const limited = await call(key).catch((e: unknown) => e);
    expect(limited).toBeInstanceOf(OpenAI.RateLimitError);
    expect((limited as InstanceType<typeof OpenAI.RateLimitError>).headers?.get('retry-after')).toMatch(/^\d+$/);
  });

  it('an SDK asking for a stream gets 400 naming `stream`, before any charge; so does partial_images', async () => {
    const { id, key } = await t.createKey({ credits_quota: 10 });
    const streamed = await client(key)
      .images.generate({ model: 'local-1', prompt: 'a lighthouse at dawn', size: '256x256', stream: true })
      .catch((e: unknown) => e);
    expect(streamed).toBeInstanceOf(OpenAI.BadRequestError);
    expect((streamed as InstanceType<typeof OpenAI.BadRequestError>).code).toBe('invalid_request');
    expect((streamed as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('stream');

    const partial = await t.api.client(key, { model: 'local-1', prompt: 'x', size: '32x32', partial_images: 2 }, '/v1/images/generations');
    expect([partial.status, partial.body.error.param]).toEqual([400, 'partial_images']);
    // `stream: false` and `partial_images: 0` ask for what we do: served as usual.
    const plain = await t.api.client(key, { model: 'local-1', prompt: 'x', size: '32x32', stream: false, partial_images: 0 }, '/v1/images/generations');
    expect(plain.status).toBe(200);
    expect(await t.api.creditsUsed(id)).toBe(1);
  });
});
