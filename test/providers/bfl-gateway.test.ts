import { BflClient, submitBody } from '../../src/providers/bfl/bfl-client';
import { storedRequestOf } from '../../src/generation/durable';
import { newSortableId } from '../../src/shared/ids';
import { routeOutboundForTests } from '../../src/shared/outbound';
import { type FakeBfl, startFakeBfl } from '../fakes/fake-bfl';
import { generationRow } from '../helpers/generation-rows';
import { dataUri, testPng } from '../helpers/test-images';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';

/** BFL's result host as the real API names it; this test routes the gateway's downloads from it back to the fake. */
const DELIVERY_HOST = 'delivery-eu1.bfl.ai';
const ENV_KEY = 'bfl-env-key-0001';
const API_KEY = 'bfl-api-key-0002';

/**
 * The bfl format through the gateway (on SQLite, and on PostgreSQL + Redis in the postgres project):
 * the environment's account and an API channel, each against a fake BFL; sync and async generations,
 * a client's cancel, and a takeover of a task whose process is gone.
 */
describe('bfl through the gateway (fake BFL)', () => {
  let envBfl: FakeBfl;
  let apiBfl: FakeBfl;
  let t: TestGateway;
  let key: string;
  let keyId: string;
  const downloaded: string[] = [];

  beforeAll(async () => {
    envBfl = await startFakeBfl({ apiKey: ENV_KEY, deliveryHost: DELIVERY_HOST });
    apiBfl = await startFakeBfl({ apiKey: API_KEY });
    // The gateway's image download of BFL's delivery host, pointed back at the fake that signed it.
    routeOutboundForTests((url) => {
      if (url.host !== DELIVERY_HOST) return undefined;
      downloaded.push(url.href);
      return envBfl.url;
    });
    t = await startTestGateway({
      BFL_API_KEY: ENV_KEY,
      BFL_BASE_URL: envBfl.url,
      UPSTREAM_POLL_INTERVAL_MS: '5',
      PROVIDER_BFL_RETRY_BASE_DELAY_MS: '5',
      PROVIDER_BFL_BREAKER_THRESHOLD: '1000',
      GENERATION_POLL_MS: '50',
    });
    ({ key, id: keyId } = await t.createKey({ allowed_providers: ['bfl'], credits_quota: 100_000 }));
  });
  afterAll(async () => {
    routeOutboundForTests(undefined);
    await t.close();
    await envBfl.close();
    await apiBfl.close();
  });

  const auth = () => ({ Authorization: `Bearer ${key}` });
  const generate = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    t.api.send('post', '/images/generate', { body: { model: 'flux-pro-1.1', size: '1024x768', ...body }, headers: { ...auth(), ...headers } });
  const creditsUsed = () => t.api.creditsUsed(keyId);
  const generation = async (id: string) => (await t.api.send('get', `/generations/${id}`, { headers: auth() })).body;
  const submitsOf = (fake: FakeBfl, prompt: string) => fake.submits.filter((s) => s.body.prompt === prompt);

  describe('the environment account (BFL_API_KEY, BFL_BASE_URL)', () => {
    it('is the read-only channel chn_envBfl of provider bfl', async () => {
      const res = await t.api.admin('get', '/admin/channels/chn_envBfl');
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ provider: 'bfl', transport: 'bfl', base_url: envBfl.url });
    });

    it("synchronous: submitted, polled, the signed sample fetched from BFL's delivery host at once and stored; one image charged", async () => {
      const before = await creditsUsed();
      const res = await generate({ prompt: 'a harbour at dawn [pending:2]', seed: 3 });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ model: 'flux-pro-1.1', provider: 'bfl', usage: { images: 1, credits_charged: 4 } });
      expect(res.body.data[0]).toMatchObject({ url: expect.stringContaining(`${t.gateway.url}/images/img_`), width: 1024, height: 768 });
      const [submit] = submitsOf(envBfl, 'a harbour at dawn [pending:2]');
      expect(submit).toMatchObject({ model: 'flux-pro-1.1', body: { prompt: 'a harbour at dawn [pending:2]', width: 1024, height: 768, seed: 3 } });
      // Admitted by BFL's documented result hosts (*.bfl.ai), fetched once, within its 10 minutes.
      expect(downloaded.filter((url) => url.includes(submit!.id))).toEqual([
        expect.stringMatching(new RegExp(`^https://${DELIVERY_HOST}/results/${submit!.id}/sample\\.jpeg\\?se=`)),
      ]);
      expect(envBfl.downloads).toContain(submit!.id);
      const stored = await fetch(res.body.data[0].url);
      expect([stored.status, stored.headers.get('content-type')]).toEqual([200, 'image/jpeg']);
      expect((await creditsUsed()) - before).toBe(4);
    });

    it('n = 2 is two tasks; b64_json answers the stored bytes', async () => {
      const res = await generate({ prompt: 'two gulls', n: 2, seed: 20, response_format: 'b64_json' });
      expect(res.status).toBe(200);
      expect(res.body.data).toHaveLength(2);
      expect(
        submitsOf(envBfl, 'two gulls')
          .map((s) => s.body.seed)
          .sort(),
      ).toEqual([20, 21]);
    });

    it('a size BFL refuses is refused before anything is sent or charged', async () => {
      const before = await creditsUsed();
      const received = envBfl.received.length;
      for (const [model, size] of [
        ['flux-pro-1.1', '1536x1024'],
        ['flux-pro-1.1', '1000x768'],
        ['flux-kontext-pro', '1000x1000'],
        ['flux-2-pro', '2064x2048'],
      ]) {
        const res = await generate({ prompt: 'off the grid', model, size });
        expect([res.status, res.body.error?.code, res.body.error?.param]).toEqual([400, 'invalid_request', 'size']);
      }
      expect(envBfl.received.length).toBe(received);
      expect(await creditsUsed()).toBe(before);
    });

    it('Kontext takes its reference image as input_image; FLUX.2 [pro] is priced by its megapixel tier', async () => {
      const png = testPng(40, 20);
      const kontext = await generate({ prompt: 'make it night', model: 'flux-kontext-pro', size: '1248x832', images: [dataUri(png)] });
      expect(kontext.status).toBe(200);
      expect(submitsOf(envBfl, 'make it night')[0]!.body).toEqual({ prompt: 'make it night', aspect_ratio: '3:2', input_image: png.toString('base64') });
      const two = await generate({ prompt: 'a wide field', model: 'flux-2-pro', size: '2048x1024' });
      expect(two.status).toBe(200);
      expect(two.body.usage).toMatchObject({ images: 1, credits_charged: 5 });
      expect(submitsOf(envBfl, 'a wide field')[0]!.body).toEqual({ prompt: 'a wide field', width: 2048, height: 1024 });
    });

    it('moderation: Request Moderated is 400 content_policy_violation, Content Moderated 422 output_moderated; nothing charged', async () => {
      const before = await creditsUsed();
      const input = await generate({ prompt: 'flagged [moderated:request]' });
      expect([input.status, input.body.error.code]).toEqual([400, 'content_policy_violation']);
      const output = await generate({ prompt: 'flagged output [moderated:content]' });
      expect([output.status, output.body.error.code]).toEqual([422, 'output_moderated']);
      expect(await creditsUsed()).toBe(before);
    });

    it('asynchronous: 202, then running, then succeeded with the stored image', async () => {
      const res = await generate({ prompt: 'an async lighthouse [pending:3]' }, { Prefer: 'respond-async' });
      expect(res.status).toBe(202);
      await until(async () => (await generation(res.body.id)).status === 'succeeded', 'the async generation to succeed');
      expect(await generation(res.body.id)).toMatchObject({
        status: 'succeeded',
        usage: { credits_charged: 4 },
        data: [{ url: expect.stringContaining('/images/img_') }],
      });
      expect(submitsOf(envBfl, 'an async lighthouse [pending:3]')).toHaveLength(1);
    });

    it("a client's cancel of a running generation: canceled at once, its sent task charged, and the task is polled no further (BFL has no cancel)", async () => {
      const prompt = 'canceled midway [hold]';
      const held = envBfl.whenHeld();
      const res = await generate({ prompt }, { Prefer: 'respond-async' });
      await held;
      const canceled = await t.api.send('post', `/generations/${res.body.id}/cancel`, { headers: auth() });
      expect(canceled.status).toBe(200);
      expect(canceled.body).toMatchObject({ status: 'canceled', usage: { credits_charged: 4 } });
      const [task] = submitsOf(envBfl, prompt);
      // Once released, a poll still running would find it Ready and fetch its sample.
      envBfl.releaseHeld();
      const after = await generate({ prompt: 'after the cancel [pending:5]' }, { Prefer: 'respond-async' });
      await until(async () => (await generation(after.body.id)).status === 'succeeded', 'a later generation to succeed');
      expect(envBfl.downloads).not.toContain(task!.id);
      expect((await generation(res.body.id)).status).toBe('canceled');
    });

    it('a takeover: the task a process that is gone had submitted is polled by its polling URL, never submitted again', async () => {
      // A finished generation's stored request, as the gone process would have stored it.
      const template = await generate({ prompt: 'template' }, { Prefer: 'respond-async' });
      await until(async () => (await generation(template.body.id)).status === 'succeeded', 'the template generation');
      const row = await t.gateway.database.db.selectFrom('generations').selectAll().where('id', '=', template.body.id).executeTakeFirstOrThrow();
      const stored = storedRequestOf(row);
      const prompt = 'taken over [pending:3]';
      stored.request.prompt = prompt;
      // The gone process's submit, with the environment account's key.
      const dead = new BflClient({ provider: 'bfl', baseUrl: envBfl.url, apiKey: ENV_KEY, pollIntervalMs: 5 });
      const pollingUrl = await dead.submit({ ...stored.request, upstreamModel: 'flux-pro-1.1' }, 0, new AbortController().signal);
      expect(submitBody({ ...stored.request, upstreamModel: 'flux-pro-1.1' }, 0)).toMatchObject({ prompt });
      const now = Date.now();
      const orphanId = newSortableId('gen', now);
      await t.gateway.database.db
        .insertInto('generations')
        .values(
          generationRow(orphanId, {
            key_id: row.key_id,
            client_id: row.client_id,
            model: 'flux-pro-1.1',
            provider: 'bfl',
            credits: 4,
            request: JSON.stringify(stored),
            status: 'running',
            lease_owner: 'replica-that-died',
            lease_expires_at: now - 1000,
            started_at: now - 2000,
            created_at: now - 2000,
            period_started_at: row.period_started_at,
            usage_epoch: row.usage_epoch,
            runs: 1,
          }),
        )
        .execute();
      await t.gateway.database.db
        .insertInto('generation_tasks')
        .values({ generation_id: orphanId, image_index: 0, channel_id: 'chn_envBfl', task_id: pollingUrl, sent_at: now - 1500 })
        .execute();
      const submits = envBfl.received.length;
      await until(async () => {
        const taken = await t.gateway.database.db.selectFrom('generations').select(['status', 'runs']).where('id', '=', orphanId).executeTakeFirstOrThrow();
        return taken.status === 'succeeded' && Number(taken.runs) === 2;
      }, 'the takeover to succeed');
      // Resumed, never repeated: the one task the gone process submitted, polled to its end.
      expect(envBfl.received.length).toBe(submits);
      expect(submitsOf(envBfl, prompt)).toHaveLength(1);
      const taskId = new URL(pollingUrl).searchParams.get('id')!;
      expect(envBfl.polls.filter((id) => id === taskId).length).toBeGreaterThanOrEqual(4);
      expect(envBfl.downloads).toContain(taskId);
      const images = await t.gateway.database.db.selectFrom('stored_images').select('id').where('generation_id', '=', orphanId).execute();
      expect(images).toHaveLength(1);
    });
  });

  describe('an API channel (POST /admin/channels, transport bfl)', () => {
    let channelId: string;

    beforeAll(async () => {
      const res = await t.api.admin('post', '/admin/channels', {
        name: 'bfl account b',
        provider: 'bfl',
        transport: 'bfl',
        base_url: apiBfl.url,
        models: [{ model: 'flux-kontext-pro' }],
        credentials: { api_key: API_KEY },
        priority: 10,
      });
      expect(res.status).toBe(201);
      channelId = res.body.id;
      expect(res.body).toMatchObject({ provider: 'bfl', transport: 'bfl', credentials_hint: expect.any(String) });
      expect(JSON.stringify(res.body)).not.toContain(API_KEY);
    });

    it('serves its model with its own key and base URL', async () => {
      const res = await generate({ prompt: 'through the api channel', model: 'flux-kontext-pro', size: '1024x1024' });
      expect(res.status).toBe(200);
      expect(submitsOf(apiBfl, 'through the api channel')).toHaveLength(1);
      expect(submitsOf(envBfl, 'through the api channel')).toHaveLength(0);
    });

    it('Kontext 16:9 (asked 1280x720): the image BFL made is 1392x752, and that is the size the answer, the generation and the stored image carry', async () => {
      const res = await generate({ prompt: 'a wide kontext harbour', model: 'flux-kontext-pro', size: '1280x720' });
      expect(res.status).toBe(200);
      expect(submitsOf(apiBfl, 'a wide kontext harbour')[0]!.body).toMatchObject({ aspect_ratio: '16:9' });
      expect(res.body.data[0]).toMatchObject({ width: 1392, height: 752 });
      const read = await t.api.send('get', `/generations/${res.body.id}`, { headers: auth() });
      expect(read.body.data[0]).toMatchObject({ width: 1392, height: 752 });
      const stored = await t.gateway.database.db
        .selectFrom('stored_images')
        .select(['width', 'height'])
        .where('generation_id', '=', res.body.id as string)
        .where('role', '=', 'output')
        .execute();
      expect(stored.map((row) => [Number(row.width), Number(row.height)])).toEqual([[1392, 752]]);
    });

    it('HTTP 402 (insufficient credits): the channel is disabled, and the request served by the environment account', async () => {
      apiBfl.failSubmitsWith(402);
      try {
        const res = await generate({ prompt: 'no credits left', model: 'flux-kontext-pro', size: '1024x1024' });
        expect(res.status).toBe(200);
        expect(apiBfl.received.filter((r) => r.body.prompt === 'no credits left')).toHaveLength(1);
        expect(submitsOf(envBfl, 'no credits left')).toHaveLength(1);
        const channel = await t.api.admin('get', `/admin/channels/${channelId}`);
        expect(channel.body).toMatchObject({ status: 'auto_disabled', disabled_reason: expect.stringContaining('HTTP 402') });
      } finally {
        apiBfl.failSubmitsWith(undefined);
      }
    });
  });
});
