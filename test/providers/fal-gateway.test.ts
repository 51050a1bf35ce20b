import { openDatabase } from '../../src/db/database';
import { decodeHandle } from '../../src/providers/fal/fal-client';
import { routeOutboundForTests } from '../../src/shared/outbound';
import { type FakeFal, startFakeFal } from '../fakes/fake-fal';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { dataUri, testPng } from '../helpers/test-images';
import { freePort } from '../helpers/throwaway-servers';
import { until } from '../helpers/until';

/**
 * The `fal` wire format through the gateway, to the fake queue (test/fakes/fake-fal.ts): its
 * environment account (FAL_KEY) and an API channel, synchronous and asynchronous generations, a
 * reference image sent inline (the gateway's own URL is a loopback one here), and a client's cancel forwarded to the
 * request's cancel_url. Both engines (the providers folder runs on SQLite and on PostgreSQL + Redis).
 */
const ENV_KEY = 'fal-env-id:fal-env-secret';
/** fal's CDN as its results name it; this test routes the gateway's downloads from it back to the fake. */
const CDN_HOST = 'v3.fal.media';
const API_KEY = 'fal-api-id:fal-api-secret';

describe('fal through the gateway: its environment account (FAL_KEY)', () => {
  let fal: FakeFal;
  let t: TestGateway;
  let key: { id: string; key: string };
  const downloaded: string[] = [];

  beforeAll(async () => {
    fal = await startFakeFal({ apiKey: ENV_KEY, cdnHost: CDN_HOST });
    routeOutboundForTests((url) => {
      if (url.host !== CDN_HOST) return undefined;
      downloaded.push(url.href);
      return fal.url;
    });
    // A loopback PUBLIC_BASE_URL (tests allow private upstreams): fal, on the internet, could not download from it.
    const port = await freePort();
    t = await startTestGateway({
      PORT: String(port),
      PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
      FAL_KEY: ENV_KEY,
      FAL_BASE_URL: fal.url,
      UPSTREAM_POLL_INTERVAL_MS: '5',
    });
    key = await t.createKey({ allowed_providers: ['fal'], credits_quota: 1000 });
  });
  afterAll(async () => {
    routeOutboundForTests(undefined);
    await t.close();
    await fal.close();
  });

  const auth = () => ({ Authorization: `Bearer ${key.key}` });
  const creditsUsed = () => t.api.creditsUsed(key.id);
  const submitsOf = (prompt: string) => fal.submits.filter((s) => s.body.prompt === prompt);

  it('synchronous: n images in one queued request (num_images), fetched from the CDN and stored; charged per image', async () => {
    const before = await creditsUsed();
    const prompt = 'a fal lighthouse';
    const res = await t.api.client(key.key, { prompt, model: 'fal-flux-dev', size: '1024x768', n: 2, seed: 5 });
    expect(res.status).toBe(200);
    expect(res.body.data).toHaveLength(2);
    for (const image of res.body.data as Array<{ url: string }>) expect(image.url).toContain('/images/img_');
    expect(submitsOf(prompt)).toHaveLength(1);
    expect(submitsOf(prompt)[0]!.body).toEqual({ prompt, num_images: 2, image_size: { width: 1024, height: 768 }, seed: 5 });
    // From fal's documented CDN (https://v3.fal.media), once each.
    const requestId = submitsOf(prompt)[0]!.requestId;
    expect(downloaded.filter((url) => url.includes(requestId))).toEqual([
      expect.stringMatching(new RegExp(`^https://${CDN_HOST}/files/png-${requestId}-0-1024x768\\.png$`)),
      expect.stringMatching(new RegExp(`^https://${CDN_HOST}/files/png-${requestId}-1-1024x768\\.png$`)),
    ]);
    // fal bills per megapixel, each image rounded up: two 1024×768 images are 1 MP each, $0.05 at $0.025, 5 credits.
    expect((await creditsUsed()) - before).toBe(5);
  });

  it('the OpenAI-compatible path, b64_json: the CDN bytes come back inline', async () => {
    const res = await t.api.client(
      key.key,
      { prompt: 'a fal harbour', model: 'fal-flux-pro-1.1', size: '1024x1024', response_format: 'b64_json' },
      '/v1/images/generations',
    );
    expect(res.status).toBe(200);
    expect(
      Buffer.from(res.body.data[0].b64_json as string, 'base64')
        .subarray(1, 4)
        .toString(),
    ).toBe('PNG');
  });

  it('asynchronous: queued, then succeeded; the request handle is in the task journal', async () => {
    const prompt = 'a fal field [queued:3] [running:3]';
    const res = await t.api.send('post', '/images/generate', {
      body: { prompt, model: 'fal-flux-dev', size: '512x512' },
      headers: { ...auth(), Prefer: 'respond-async' },
    });
    expect(res.status).toBe(202);
    const read = async () => (await t.api.send('get', `/generations/${res.body.id}`, { headers: auth() })).body as { status: string; data: unknown[] };
    await until(async () => (await read()).status === 'succeeded', 'the fal generation to succeed');
    expect((await read()).data).toHaveLength(1);
    expect(submitsOf(prompt)).toHaveLength(1);
    // The journal holds the request's own URLs: what a takeover polls.
    const observer = openDatabase(t.databaseUrl, { poolSize: 1 });
    try {
      const [task] = await observer.db
        .selectFrom('generation_tasks')
        .selectAll()
        .where('generation_id', '=', res.body.id as string)
        .execute();
      expect(decodeHandle(task!.task_id!)).toMatchObject({
        request_id: submitsOf(prompt)[0]!.requestId,
        status_url: expect.stringContaining(`/fal-ai/flux/requests/${submitsOf(prompt)[0]!.requestId}/status`),
      });
    } finally {
      await observer.close();
    }
  });

  it("Kontext on a private install (the gateway's URL is a loopback one fal could not download): the reference image goes as a data URI, fal reads the exact bytes; the size fal made is delivered", async () => {
    const png = testPng(48, 32, { shade: 9 });
    const prompt = 'make it blue';
    const res = await t.api.client(key.key, { prompt, model: 'fal-flux-kontext-pro', size: '1280x720', images: [dataUri(png)] });
    expect(res.status).toBe(200);
    const [submit] = submitsOf(prompt);
    expect(submit!.body).toMatchObject({ aspect_ratio: '16:9', num_images: 1, image_url: `data:image/png;base64,${png.toString('base64')}` });
    expect(submit!.images[0]).toMatchObject({ via: 'data-uri', format: 'png' });
    expect(submit!.images[0]!.bytes.equals(png)).toBe(true);
    expect(res.body.data[0]).toMatchObject({ width: 1392, height: 752 });
  });

  it('Kontext without a reference image: refused before anything is sent, nothing charged', async () => {
    const before = fal.submits.length;
    const used = await creditsUsed();
    const res = await t.api.client(key.key, { prompt: 'no reference', model: 'fal-flux-kontext-pro', size: '1024x1024' });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'images' });
    expect(fal.submits.length).toBe(before);
    expect(await creditsUsed()).toBe(used);
  });

  it("a size fal's schema refuses is refused by the gateway before anything is sent", async () => {
    const res = await t.api.client(key.key, { prompt: 'too tall', model: 'fal-flux-kontext-pro', size: '1000x1000', images: [dataUri(testPng(8, 8))] });
    expect(res.status).toBe(400);
    expect(res.body.error.param).toBe('size');
  });

  it("a client's cancel of a generation whose request is still queued is forwarded to its cancel_url", async () => {
    const prompt = 'cancel me at fal [hold]';
    const res = await t.api.send('post', '/images/generate', {
      body: { prompt, model: 'fal-flux-dev', size: '512x512' },
      headers: { ...auth(), Prefer: 'respond-async' },
    });
    expect(res.status).toBe(202);
    // Submitted, its handle recorded, and polled while queued.
    await until(() => submitsOf(prompt).length === 1 && (fal.statusPolls.get(submitsOf(prompt)[0]!.requestId) ?? 0) > 0, 'the request to be queued at fal');
    const requestId = submitsOf(prompt)[0]!.requestId;
    const cancel = await t.api.send('post', `/generations/${res.body.id}/cancel`, { headers: auth() });
    expect(cancel.status).toBe(200);
    expect(cancel.body.status).toBe('canceled');
    await until(() => fal.cancelled.includes(requestId), 'the cancel to reach fal');
    expect(fal.cancelCalls.filter((c) => c.requestId === requestId)).toEqual([{ requestId, answered: 'CANCELLATION_REQUESTED' }]);
    expect(fal.made.filter((p) => p === prompt)).toEqual([]);
  });

  it("content_policy_violation at fal is the client's content (400), its credits released", async () => {
    const used = await creditsUsed();
    const res = await t.api.client(key.key, { prompt: 'flagged [error:content_policy_violation:422]', model: 'fal-flux-dev', size: '512x512' });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('content_policy_violation');
    expect(await creditsUsed()).toBe(used);
  });
});

describe('fal through the gateway: an API channel', () => {
  let fal: FakeFal;
  let t: TestGateway;
  let key: { id: string; key: string };
  let channelId: string;

  beforeAll(async () => {
    fal = await startFakeFal({ apiKey: API_KEY });
    t = await startTestGateway({ UPSTREAM_POLL_INTERVAL_MS: '5' });
    key = await t.createKey({ allowed_providers: ['fal'], credits_quota: 1000 });
    const res = await t.api.admin('post', '/admin/channels', {
      name: 'fal account',
      provider: 'fal',
      transport: 'fal',
      base_url: fal.url,
      models: [{ model: 'fal-flux-dev' }, { model: 'fal-flux-pro-1.1' }],
      credentials: { api_key: API_KEY },
    });
    expect(res.status).toBe(201);
    channelId = res.body.id as string;
    expect(res.body).toMatchObject({ transport: 'fal', provider: 'fal', base_url: fal.url, source: 'api' });
    expect(res.body.credentials_hint).not.toContain('fal-api-secret');
  });
  afterAll(async () => {
    await t.close();
    await fal.close();
  });

  const auth = () => ({ Authorization: `Bearer ${key.key}` });

  it('serves the models it lists, synchronously and asynchronously', async () => {
    const sync = await t.api.client(key.key, { prompt: 'over the API channel', model: 'fal-flux-pro-1.1', size: '1024x1024' });
    expect(sync.status).toBe(200);
    const res = await t.api.send('post', '/images/generate', {
      body: { prompt: 'async over the API channel', model: 'fal-flux-dev', size: '512x512' },
      headers: { ...auth(), Prefer: 'respond-async' },
    });
    expect(res.status).toBe(202);
    await until(
      async () => (await t.api.send('get', `/generations/${res.body.id}`, { headers: auth() })).body.status === 'succeeded',
      'the async generation over the API channel',
    );
    expect(fal.submits.map((s) => s.body.prompt)).toEqual(['over the API channel', 'async over the API channel']);
  });

  it("a revoked key (401) disables the channel, with the upstream's reason", async () => {
    fal.setApiKey('rotated-id:rotated-secret');
    const res = await t.api.client(key.key, { prompt: 'after the key was revoked', model: 'fal-flux-dev', size: '512x512' });
    expect(res.status).not.toBe(200);
    const channel = await t.api.admin('get', `/admin/channels/${channelId}`);
    expect(channel.body.status).toBe('auto_disabled');
    expect(channel.body.disabled_reason).toContain('No user found');
  });
});
