import { toFile } from 'openai';
import type { FakeImagesApi } from '../fakes/fake-images-api';
import { type FakeVisual, startFakeVisual } from '../fakes/fake-volc-visual';
import { startArkGateway } from '../helpers/ark-gateway';
import { expectOnePng, openaiClient } from '../helpers/openai-sdk';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { dataUri, testPng } from '../helpers/test-images';
import { freePort } from '../helpers/throwaway-servers';

const ARK_KEY = 'ark-inputs-e2e';
const credentials = { accessKeyId: 'AKLTinputs', secretAccessKey: 'inputs-secret' };
const visualEnv = (visual: FakeVisual) => ({
  VOLC_ACCESS_KEY_ID: credentials.accessKeyId,
  VOLC_SECRET_ACCESS_KEY: credentials.secretAccessKey,
  VOLC_VISUAL_ENDPOINT: visual.url,
  VOLC_POLL_INTERVAL_MS: '5',
});

/**
 * Issue #27 §1 end to end: a client's input images through the gateway to the fake upstreams,
 * which decode (Ark's data URIs) or fetch (the visual API's `image_urls`) them as the real ones do:
 * what they read must be the client's bytes.
 */
describe('image inputs through the gateway to the fake upstreams (Ark data URIs, visual API gateway URLs)', () => {
  let ark: FakeImagesApi;
  let visual: FakeVisual;
  let t: TestGateway;
  let publicBaseUrl: string;

  beforeAll(async () => {
    visual = await startFakeVisual(credentials);
    // The gateway's public address set explicitly, to the port it will listen on.
    const port = await freePort();
    publicBaseUrl = `http://127.0.0.1:${port}`;
    ({ t, ark } = await startArkGateway({ apiKey: ARK_KEY, env: { PORT: String(port), PUBLIC_BASE_URL: publicBaseUrl, ...visualEnv(visual) } }));
  });
  afterAll(async () => {
    await t.close();
    await visual.close();
  });

  const newKey = (quota = 100) => t.createKey({ credits_quota: quota, allowed_providers: ['local', 'jimeng'] });
  const creditsUsed = (id: string) => t.api.creditsUsed(id);
  /** An earlier output of `key` (local-1, 64x64): its img_ id and the bytes the gateway keeps for it. */
  const earlierOutput = async (key: string) => {
    const made = await t.api.client(key, { prompt: 'an earlier picture', model: 'local-1', size: '64x64' });
    expect(made.status).toBe(200);
    const url = made.body.data[0].url as string;
    const id = /\/images\/(img_[0-9A-Za-z]+)\?/.exec(url)![1]!;
    const bytes = Buffer.from(await (await fetch(url)).arrayBuffer());
    expect(bytes.subarray(1, 4).toString()).toBe('PNG');
    return { id, bytes };
  };

  it("jimeng-4.5 (Ark): a data URI and an img_ id of the key's earlier output arrive as `image`, two data URIs of those bytes, on each call; charged per image delivered", async () => {
    const { id, key } = await newKey();
    const earlier = await earlierOutput(key);
    const uploaded = testPng(40, 30, { shade: 7 });
    const before = await creditsUsed(id);
    const prompt = 'ark: both references';
    const res = await t.api.client(key, {
      prompt,
      model: 'jimeng-4.5',
      size: '2048x2048',
      n: 2,
      response_format: 'b64_json',
      images: [dataUri(uploaded), earlier.id],
    });
    expect(res.status).toBe(200);
    expect(res.body.data).toHaveLength(2);
    // One call per image, each with both references in the client's order.
    const calls = ark.requests.filter((r) => r.prompt === prompt);
    expect(calls).toHaveLength(2);
    for (const call of calls) expect(call.image).toEqual([dataUri(uploaded), dataUri(earlier.bytes)]);
    const received = ark.inputs.filter((i) => i.prompt === prompt);
    expect(received).toHaveLength(2);
    for (const { images } of received) {
      expect(images.map((image) => [image?.via, image?.format, image?.width, image?.height])).toEqual([
        ['data-uri', 'png', 40, 30],
        ['data-uri', 'png', 64, 64],
      ]);
      expect(images[0]!.bytes.equals(uploaded)).toBe(true);
      expect(images[1]!.bytes.equals(earlier.bytes)).toBe(true);
    }
    // 4 credits per image, 2 delivered.
    expect(res.body.usage).toMatchObject({ images: 2, credits_charged: 8 });
    expect((await creditsUsed(id)) - before).toBe(8);
  });

  it("jimeng-4.0 (visual API): `image_urls` are the gateway's signed URLs on PUBLIC_BASE_URL, and the upstream fetched the exact bytes from them", async () => {
    const { id, key } = await newKey();
    const earlier = await earlierOutput(key);
    const uploaded = testPng(300, 200, { shade: 11 });
    const before = await creditsUsed(id);
    const prompt = 'visual: both references';
    const res = await t.api.client(key, { prompt, model: 'jimeng-4.0', images: [earlier.id, dataUri(uploaded)] });
    expect(res.status).toBe(200);
    expect(res.body.data).toHaveLength(1);
    const submits = visual.requests.filter((r) => r.action === 'CVSync2AsyncSubmitTask' && r.body.prompt === prompt);
    expect(submits).toHaveLength(1);
    const urls = submits[0]!.body.image_urls as string[];
    expect(urls).toHaveLength(2);
    for (const url of urls) expect(url).toMatch(new RegExp(`^${publicBaseUrl}/images/img_[0-9A-Za-z]+\\?expires=\\d+&signature=`));
    // The earlier output is named by its own id; the upload is stored as an input of this generation.
    expect(urls[0]).toContain(`/images/${earlier.id}?`);
    const received = visual.inputs.find((i) => i.prompt === prompt)!;
    expect(received.urls).toEqual(urls);
    expect(received.images.map((image) => [image?.via, image?.format, image?.width, image?.height])).toEqual([
      ['url', 'png', 64, 64],
      ['url', 'png', 300, 200],
    ]);
    expect(received.images[0]!.bytes.equals(earlier.bytes)).toBe(true);
    expect(received.images[1]!.bytes.equals(uploaded)).toBe(true);
    expect(res.body.usage).toMatchObject({ images: 1, credits_charged: 3 });
    expect((await creditsUsed(id)) - before).toBe(3);
  });

  it('POST /v1/images/edits with the official openai SDK, two uploads to jimeng-4.5: Ark receives both, byte for byte', async () => {
    const { id, key } = await newKey();
    const client = openaiClient(t, key);
    const [first, second] = [testPng(32, 48, { shade: 1 }), testPng(20, 20, { shade: 200 })];
    const prompt = 'sdk: put the two together';
    const answer = await client.images.edit({
      image: [await toFile(first, 'first.png', { type: 'image/png' }), await toFile(second, 'second.png', { type: 'image/png' })],
      prompt,
      model: 'jimeng-4.5',
      size: '2048x2048',
      response_format: 'b64_json',
    });
    expectOnePng(answer);
    const received = ark.inputs.filter((i) => i.prompt === prompt);
    expect(received).toHaveLength(1);
    const [a, b] = received[0]!.images;
    expect([a?.via, a?.bytes.equals(first), b?.via, b?.bytes.equals(second)]).toEqual(['data-uri', true, 'data-uri', true]);
    expect(await creditsUsed(id)).toBe(4);
  });
});

/**
 * The visual API fetches its inputs from the gateway: a gateway whose address it cannot reach
 * (PUBLIC_BASE_URL unset, or private, and upstreams not declared private) refuses the request
 * before anything is stored, reserved or submitted.
 */
describe('jimeng-4.0 inputs without a public gateway address: 422 image_input_public_url_required, nothing charged or submitted', () => {
  let visual: FakeVisual;
  beforeAll(async () => {
    visual = await startFakeVisual(credentials);
  });
  afterAll(() => visual.close());

  it.each([
    ['PUBLIC_BASE_URL unset', {}, /PUBLIC_BASE_URL is not set/],
    ['PUBLIC_BASE_URL private', { PUBLIC_BASE_URL: 'http://127.0.0.1:8080' }, /PUBLIC_BASE_URL \(http:\/\/127\.0\.0\.1:8080\)/],
  ])('%s', async (_name, env: Record<string, string>, why: RegExp) => {
    const t = await startTestGateway({ CHANNEL_ALLOW_PRIVATE_UPSTREAMS: 'false', ...visualEnv(visual), ...env });
    try {
      const { id, key } = await t.createKey({ credits_quota: 100, allowed_providers: ['jimeng'] });
      const res = await t.api.client(key, { prompt: 'no public address', model: 'jimeng-4.0', images: [dataUri(testPng(64, 64)), dataUri(testPng(80, 60))] });
      expect([res.status, res.body.error?.code, res.body.error?.param]).toEqual([422, 'image_input_public_url_required', 'images']);
      expect(res.body.error.message).toMatch(why);
      expect(await t.api.creditsUsed(id)).toBe(0);
      expect(visual.requests).toEqual([]);
      // Nothing stored either: no generation, no input image.
      expect(await t.gateway.database.db.selectFrom('stored_images').select('id').execute()).toEqual([]);
    } finally {
      await t.close();
    }
  });
});
