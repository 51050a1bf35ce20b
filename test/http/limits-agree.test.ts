import request from 'supertest';
import { type FakeOpenAIImages, startFakeOpenAIImages } from '../fakes/fake-openai-images';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { testPng } from '../helpers/test-images';

const MIB = 1024 * 1024;

/** The limits a client is told (GET /v1/models) are the ones it meets, in the same words whatever form the request takes. */
describe('limits that agree', () => {
  let upstream: FakeOpenAIImages;
  let t: TestGateway;
  let key: string;
  beforeAll(async () => {
    upstream = await startFakeOpenAIImages({ apiKey: 'sk-limits' });
    t = await startTestGateway({ OPENAI_API_KEY: 'sk-limits', OPENAI_BASE_URL: `${upstream.url}/v1` });
    ({ key } = await t.createKey({ allowed_providers: ['local', 'openai'], credits_quota: 100_000 }));
  });
  afterAll(async () => {
    await t.close();
    await upstream.close();
  });

  const model = async (id: string) => (await request(t.gateway.url).get(`/v1/models/${id}`).set('Authorization', `Bearer ${key}`)).body;

  it("/v1/models shows each model's prompt limit, and input limits within the gateway's (gpt-image-1: 15 MiB, not OpenAI's 50 MB)", async () => {
    const gpt = await model('gpt-image-1');
    expect(gpt.max_prompt_chars).toBe(32_000);
    expect(gpt.input_limits).toMatchObject({ max_images: 16, max_bytes: 15 * MIB, max_pixels: 36_000_000 });
    expect((await model('local-1')).max_prompt_chars).toBe(4000);
    expect((await model('dall-e-3')).max_prompt_chars).toBe(4000);
  });

  it("a prompt is checked against its model's limit: 5,000 characters pass on gpt-image-1 and are refused on local-1, on both routes alike", async () => {
    const prompt = 'a lighthouse '.repeat(385).slice(0, 5000);
    const gpt = await t.api.client(
      key,
      { model: 'gpt-image-1', prompt, size: '1024x1024', quality: 'low', response_format: 'b64_json' },
      '/v1/images/generations',
    );
    expect(gpt.status).toBe(200);
    expect(upstream.requests.at(-1)?.fields.prompt).toBe(prompt);
    const refused = [
      await t.api.client(key, { model: 'local-1', prompt, size: '32x32' }),
      await t.api.client(key, { model: 'local-1', prompt, size: '32x32' }, '/v1/images/generations'),
    ];
    for (const res of refused) {
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'prompt', message: 'prompt: 5000 characters; model local-1 takes at most 4000.' });
    }
  });

  it('the same 100 KB prompt: 400 param prompt on /images/generate and /v1/images/generations, the same message', async () => {
    const prompt = 'x'.repeat(100_000);
    const answers = [await t.api.client(key, { model: 'local-1', prompt }), await t.api.client(key, { model: 'local-1', prompt }, '/v1/images/generations')];
    expect(answers.map((res) => res.status)).toEqual([400, 400]);
    expect(answers[1]!.body.error).toMatchObject({ code: 'invalid_request', param: 'prompt' });
    expect(answers[1]!.body.error.message).toBe(answers[0]!.body.error.message);
  });

  it('an input over 15 MiB for gpt-image-1: 413 in the same words as a data URI and as an uploaded file', async () => {
    // A PNG header followed by filler: the byte limit is checked before anything reads the image.
    const big = Buffer.concat([testPng(32, 32), Buffer.alloc(16 * MIB)]);
    const asDataUri = await t.api.client(key, {
      model: 'gpt-image-1',
      prompt: 'make it blue',
      size: '1024x1024',
      images: [`data:image/png;base64,${big.toString('base64')}`],
    });
    const asFile = await request(t.gateway.url)
      .post('/v1/images/edits')
      .set('Authorization', `Bearer ${key}`)
      .field('model', 'gpt-image-1')
      .field('prompt', 'make it blue')
      .attach('image', big, 'big.png');
    expect([asDataUri.status, asFile.status]).toEqual([413, 413]);
    const expected = {
      code: 'image_input_too_large',
      param: 'images[0]',
      message: 'images[0]: larger than 15728640 bytes (15 MiB), the most any input image may have.',
    };
    expect(asDataUri.body.error).toMatchObject(expected);
    expect(asFile.body.error).toMatchObject(expected);
  });
});
