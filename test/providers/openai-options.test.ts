import { toFile } from 'openai';
import { type FakeOpenAIImages, startFakeOpenAIImages } from '../fakes/fake-openai-images';
import { openaiClient } from '../helpers/openai-sdk';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { testPng } from '../helpers/test-images';
import { until } from '../helpers/until';

const ENV_KEY = 'sk-openai-options';

/**
 * The `openai` format through the gateway (SQLite, and PostgreSQL + Redis in the postgres project),
 * against a fake OpenAI that refuses what the real one refuses: OpenAI's output options taken from
 * the OpenAI-compatible requests and sent where the model documents them (refused before anything is
 * charged where it does not take the value), synchronously and from a stored asynchronous request;
 * and a client's cancel of a call in flight.
 */
describe('openai through the gateway: output options and a client cancel (fake OpenAI)', () => {
  let openai: FakeOpenAIImages;
  let t: TestGateway;
  let key: string;
  let keyId: string;

  beforeAll(async () => {
    openai = await startFakeOpenAIImages({ apiKey: ENV_KEY });
    t = await startTestGateway({ OPENAI_API_KEY: ENV_KEY, OPENAI_BASE_URL: `${openai.url}/v1`, GENERATION_POLL_MS: '50' });
    ({ key, id: keyId } = await t.createKey({ allowed_providers: ['openai', 'local'], credits_quota: 100_000 }));
  });
  afterAll(async () => {
    openai.releaseHeld();
    await t.close();
    await openai.close();
  });

  const auth = () => ({ Authorization: `Bearer ${key}` });
  const creditsUsed = () => t.api.creditsUsed(keyId);
  const generation = async (id: string) => (await t.api.send('get', `/generations/${id}`, { headers: auth() })).body;
  const sentFor = (prompt: string) => openai.requests.filter((r) => r.fields.prompt === prompt);
  const openaiGenerate = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    t.api.send('post', '/v1/images/generations', {
      body: { model: 'gpt-image-1', size: '1024x1024', quality: 'low', ...body },
      headers: { ...auth(), ...headers },
    });

  it('SDK generate: background, output_format, output_compression and moderation reach OpenAI as given; style (dall-e-3 only) is not sent', async () => {
    const prompt = 'a glass bottle on a table';
    const answer = await openaiClient(t, key).images.generate({
      model: 'gpt-image-1',
      prompt,
      size: '1024x1024',
      quality: 'low',
      background: 'transparent',
      output_format: 'webp',
      output_compression: 60,
      moderation: 'low',
      style: 'vivid',
      response_format: 'b64_json',
    });
    expect(answer.data).toHaveLength(1);
    expect(sentFor(prompt).map((r) => r.fields)).toEqual([
      {
        model: 'gpt-image-1',
        prompt,
        n: 1,
        size: '1024x1024',
        quality: 'low',
        background: 'transparent',
        output_format: 'webp',
        output_compression: 60,
        moderation: 'low',
      },
    ]);
  });

  it('SDK edit with a mask: input_fidelity, output_format and output_compression as multipart fields; gpt-image-1-mini gets no input_fidelity', async () => {
    for (const [model, fidelity] of [
      ['gpt-image-1', { input_fidelity: 'high' }],
      ['gpt-image-1-mini', {}],
    ] as const) {
      const prompt = `keep the face, ${model}`;
      const answer = await openaiClient(t, key).images.edit({
        model,
        prompt,
        image: await toFile(testPng(32, 32), 'face.png', { type: 'image/png' }),
        mask: await toFile(testPng(32, 32, { alpha: true }), 'mask.png', { type: 'image/png' }),
        size: '1024x1024',
        quality: 'medium',
        input_fidelity: 'high',
        output_format: 'jpeg',
        output_compression: 70,
        response_format: 'b64_json',
      });
      // OpenAI answers the format asked for: a JPEG.
      expect(answer.data).toHaveLength(1);
      expect([...Buffer.from(answer.data![0]!.b64_json!, 'base64').subarray(0, 3)]).toEqual([0xff, 0xd8, 0xff]);
      const [sent] = sentFor(prompt);
      expect(sent!.endpoint).toBe('edits');
      expect(sent!.fields).toEqual({
        model,
        prompt,
        n: '1',
        size: '1024x1024',
        quality: 'medium',
        output_format: 'jpeg',
        output_compression: '70',
        ...fidelity,
      });
      expect(sent!.files.map((file) => file.field)).toEqual(['image[]', 'mask']);
    }
  });

  it('a value the model does not take is 400 naming the field, before anything is charged or sent', async () => {
    const before = await creditsUsed();
    const calls = openai.requests.length;
    const refused = async (body: Record<string, unknown>, param: string) => {
      const res = await openaiGenerate({ prompt: 'refused', ...body });
      expect([res.status, res.body.error?.code, res.body.error?.param]).toEqual([400, 'invalid_request', param]);
    };
    await refused({ background: 'blue' }, 'background');
    await refused({ background: 'transparent', output_format: 'jpeg' }, 'background');
    await refused({ moderation: 'strict' }, 'moderation');
    await refused({ output_format: 'gif' }, 'output_format');
    await refused({ output_compression: 101 }, 'output_compression');
    await refused({ model: 'dall-e-3', quality: 'hd', style: 'bold' }, 'style');
    const edit = await openaiClient(t, key)
      .images.edit({
        model: 'gpt-image-1',
        prompt: 'refused edit',
        image: await toFile(testPng(16, 16), 'a.png', { type: 'image/png' }),
        size: '1024x1024',
        input_fidelity: 'medium' as 'high',
      })
      .then(
        () => undefined,
        (error: { status?: number; param?: string }) => [error.status, error.param],
      );
    expect(edit).toEqual([400, 'input_fidelity']);
    expect(openai.requests.length).toBe(calls);
    expect(await creditsUsed()).toBe(before);
  });

  it('a model whose upstream does not document an option ignores it: dall-e-3 gets its style and not the background; local-1 takes any', async () => {
    const prompt = 'a quiet harbour, natural';
    const res = await openaiGenerate({
      prompt,
      model: 'dall-e-3',
      quality: 'standard',
      background: 'transparent',
      output_format: 'webp',
      style: 'natural',
      response_format: 'b64_json',
    });
    expect(res.status).toBe(200);
    expect(sentFor(prompt).map((r) => r.fields)).toEqual([
      { model: 'dall-e-3', prompt, n: 1, size: '1024x1024', quality: 'standard', style: 'natural', response_format: 'b64_json' },
    ]);
    const local = await openaiGenerate({ prompt: 'local', model: 'local-1', size: '64x64', quality: undefined, background: 'blue', moderation: 'strict' });
    expect(local.status).toBe(200);
  });

  it('asynchronously: the options are stored with the request and sent by the worker that runs it', async () => {
    const prompt = 'an opaque poster, later';
    const res = await openaiGenerate({ prompt, background: 'opaque', output_format: 'png' }, { Prefer: 'respond-async' });
    expect(res.status).toBe(202);
    await until(async () => (await generation(res.body.id)).status === 'succeeded', 'the async generation to succeed');
    expect(sentFor(prompt).map((r) => r.fields)).toEqual([
      { model: 'gpt-image-1', prompt, n: 1, size: '1024x1024', quality: 'low', background: 'opaque', output_format: 'png' },
    ]);
  });

  it("a client's cancel while the call is at OpenAI: canceled at once, the sent call charged, the call dropped and never sent again", async () => {
    const prompt = 'canceled while drawing [hold]';
    const before = await creditsUsed();
    const res = await openaiGenerate({ prompt, n: 2 }, { Prefer: 'respond-async' });
    expect(res.status).toBe(202);
    await openai.whenHeld();
    const canceled = await t.api.send('post', `/generations/${res.body.id}/cancel`, { headers: auth() });
    expect(canceled.status).toBe(200);
    // The one call (n = 2) was written to OpenAI, which bills it whether or not anyone takes the images.
    // gpt-image-1 low at 1024x1024, $0.011: 2 credits an image at a cent a credit.
    expect(canceled.body).toMatchObject({ status: 'canceled', usage: { credits_charged: 2 * 2 } });
    await until(() => openai.abandoned.includes(prompt), 'the gateway to drop the call');
    openai.releaseHeld();
    const after = await openaiGenerate({ prompt: 'after the cancel' }, { Prefer: 'respond-async' });
    await until(async () => (await generation(after.body.id)).status === 'succeeded', 'a later generation to succeed');
    expect(sentFor(prompt)).toHaveLength(1);
    expect(openai.made).not.toContain(prompt);
    expect(await generation(res.body.id)).toMatchObject({ status: 'canceled' });
    expect((await creditsUsed()) - before).toBe(2 * 2 + 2);
  });
});
