import { BOOKS_CATALOG } from '../helpers/books';
import type { FakeImagesApi } from '../fakes/fake-images-api';
import { startArkGateway } from '../helpers/ark-gateway';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';
import { WebhookReceiver } from '../helpers/webhook-receiver';
import { sweepOnce } from '../../src/maintenance/sweeper';
import { Sealer } from '../../src/shared/sealing';
import { resealWebhookSecrets, WebhookSecrets } from '../../src/webhooks/secret-sealing';

/**
 * Issue #17, completion webhooks: a generation request's `webhook` receives a Standard Webhooks
 * delivery when it settles (completed, failed, canceled, as its filter asks), signed with the key's
 * secret read through GET /v1/webhook-secret and verified here with the `standardwebhooks` package.
 */
describe('completion webhooks (webhook, webhook_events_filter; getWebhookSigningSecret)', () => {
  let t: TestGateway;
  let ark: FakeImagesApi;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    ({ t, ark } = await startArkGateway({
      apiKey: 'ark-hooks',
      env: { MODEL_CATALOG: JSON.stringify(BOOKS_CATALOG), GENERATION_POLL_MS: '50', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_POLL_INTERVAL_MS: '20' },
    }));
  });
  afterAll(async () => {
    await t.close();
    await receiver.close();
  });

  const newKey = async () => (await t.createKey({ credits_quota: 100, allowed_providers: ['local', 'jimeng'] })).key;
  const auth = (key: string) => ({ Authorization: `Bearer ${key}` });
  const submit = (key: string, body: Record<string, unknown>, path = '/images/generate', prefer: string | undefined = 'respond-async') =>
    t.api.send('post', path, { body, headers: { ...auth(key), ...(prefer ? { Prefer: prefer } : {}) } });
  const secretOf = async (key: string) => {
    const res = await t.api.send('get', '/v1/webhook-secret', { headers: auth(key) });
    expect(res.status).toBe(200);
    return res.body.secret as string;
  };
  const deliveredFor = (id: string) => receiver.received.filter((r) => (JSON.parse(r.body) as { data: { id: string } }).data.id === id);
  const statusOf = async (key: string, id: string) => (await t.api.send('get', `/generations/${id}`, { headers: auth(key) })).body.status as string;

  it('getWebhookSigningSecret: 401 without a key; a whsec_ secret, the same on every read, another per key', async () => {
    const anonymous = await t.api.send('get', '/v1/webhook-secret');
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.error.code).toBe('missing_api_key');
    const wrong = await t.api.send('get', '/v1/webhook-secret', { headers: auth('sk-nope') });
    expect(wrong.status).toBe(401);
    const key = await newKey();
    const first = await t.api.send('get', '/v1/webhook-secret', { headers: auth(key) });
    expect(first.body).toMatchObject({ object: 'webhook_secret', secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/=]{40,}$/) });
    expect(await secretOf(key)).toBe(first.body.secret);
    expect(await secretOf(await newKey())).not.toBe(first.body.secret);
    // Stored sealed, never in clear.
    const stored = await t.gateway.database.db.selectFrom('key_webhook_secrets').select('secret').execute();
    expect(stored.length).toBeGreaterThanOrEqual(2);
    for (const row of stored) expect(row.secret).not.toContain('whsec_');
  });

  it('generation.completed reaches the webhook of an async generation, signed with the key secret; data is the generation as GET shows it', async () => {
    const key = await newKey();
    receiver.secrets.push(await secretOf(key));
    const res = await submit(key, { prompt: 'hooked', model: 'local-1', response_format: 'url', webhook: `${receiver.url}/done` });
    expect(res.status).toBe(202);
    await until(() => deliveredFor(res.body.id).length > 0, 'the completion webhook');
    const [delivery] = deliveredFor(res.body.id);
    expect(delivery!.event).toBeDefined();
    expect(delivery!.id).toMatch(/^msg_/);
    expect(delivery!.event!.type).toBe('generation.completed');
    const resource = (await t.api.send('get', `/generations/${res.body.id}`, { headers: auth(key) })).body;
    const data = delivery!.event!.data as { id: string; status: string; data: Array<{ url: string }>; usage: unknown };
    expect(data).toMatchObject({ id: res.body.id, object: 'generation', status: 'succeeded', usage: resource.usage });
    expect(data.data).toHaveLength(1);
    // The gateway's own signed URL, which serves the image without the key.
    const image = await fetch(data.data[0]!.url);
    expect(image.status).toBe(200);
    expect(image.headers.get('content-type')).toMatch(/^image\//);
  });

  it('the OpenAI shape and a synchronous request take a webhook too', async () => {
    const key = await newKey();
    receiver.secrets.push(await secretOf(key));
    const sync = await submit(key, { prompt: 'sync hooked', model: 'local-1', response_format: 'b64_json', webhook: receiver.url }, '/images/generate', '');
    expect(sync.status).toBe(200);
    const openai = await submit(
      key,
      { prompt: 'openai hooked', model: 'local-1', webhook: receiver.url, webhook_events_filter: ['completed'] },
      '/v1/images/generations',
    );
    expect(openai.status).toBe(202);
    await until(() => deliveredFor(sync.body.id).length > 0 && deliveredFor(openai.body.id).length > 0, 'both completion webhooks');
    expect(deliveredFor(sync.body.id)[0]!.event!.type).toBe('generation.completed');
    expect(deliveredFor(openai.body.id)[0]!.event!.type).toBe('generation.completed');
  });

  it('the filter is respected: a succeeded generation filtered to [failed] queues no delivery', async () => {
    const key = await newKey();
    const res = await submit(key, { prompt: 'filtered', model: 'local-1', webhook: receiver.url, webhook_events_filter: ['failed', 'canceled'] });
    await until(async () => (await statusOf(key, res.body.id)) === 'succeeded', 'the generation to succeed');
    // Queued (or not) in the settling transaction: nothing exists for it once it succeeded.
    const events = await t.gateway.database.db.selectFrom('events').select('id').where('dedupe_key', '=', `generation:${res.body.id}`).execute();
    expect(events).toEqual([]);
    expect(deliveredFor(res.body.id)).toEqual([]);
  });

  it('generation.failed on an upstream failure, with the error; generation.canceled on cancel', async () => {
    const key = await newKey();
    receiver.secrets.push(await secretOf(key));
    const failing = await submit(key, { prompt: 'bad [error:InvalidParameter:400]', model: 'held-1', webhook: receiver.url });
    expect(failing.status).toBe(202);
    await until(() => deliveredFor(failing.body.id).length > 0, 'the failure webhook');
    const failed = deliveredFor(failing.body.id)[0]!;
    expect(failed.event!.type).toBe('generation.failed');
    expect(failed.event!.data).toMatchObject({ status: 'failed', error: { code: expect.any(String) }, data: null, usage: { credits_charged: 0 } });

    const held = await submit(key, { prompt: 'to cancel [hold:c1]', model: 'held-1', webhook: receiver.url });
    await ark.whenHeld('c1');
    expect((await t.api.send('post', `/generations/${held.body.id}/cancel`, { headers: auth(key) })).status).toBe(200);
    ark.releaseHeld('c1');
    await until(() => deliveredFor(held.body.id).length > 0, 'the cancel webhook');
    expect(deliveredFor(held.body.id)[0]!.event).toMatchObject({ type: 'generation.canceled', data: { status: 'canceled', error: { code: 'canceled' } } });
  });

  it('generation.failed when the sweeper abandons a generation its process lost (abandoned, released)', async () => {
    const key = await newKey();
    receiver.secrets.push(await secretOf(key));
    const lost = await submit(key, { prompt: 'lost [hold:s1]', model: 'held-1', webhook: receiver.url, webhook_events_filter: ['failed'] });
    await ark.whenHeld('s1');
    t.clock.advanceMs(10_000);
    const hooks = t.gateway.generation.completionWebhooks!;
    const result = await sweepOnce({ db: t.gateway.database.db, clock: t.clock, staleAfterMs: { jimeng: 1_000 }, onSettled: (trx, id) => hooks.emit(trx, id) });
    expect(result.abandoned).toBeGreaterThanOrEqual(1);
    ark.releaseHeld('s1');
    await until(() => deliveredFor(lost.body.id).length > 0, 'the abandoned webhook');
    expect(deliveredFor(lost.body.id)[0]!.event).toMatchObject({ type: 'generation.failed', data: { status: 'failed', error: { code: 'abandoned' } } });
  });

  it('key secrets are sealed bound to their key, and resealed under a new sealing key at startup (resealWebhookSecrets)', async () => {
    const oldKey = Buffer.alloc(32, 0x51);
    const newKey = Buffer.alloc(32, 0x52);
    const before = new WebhookSecrets(new Sealer([oldKey]));
    const sealed = before.sealForKey('key_a', 'whsec_abc');
    expect(before.openForKey('key_a', sealed)).toBe('whsec_abc');
    expect(() => before.openForKey('key_b', sealed)).toThrow();
    expect(() => before.open('key_a', sealed)).toThrow();
    const db = t.gateway.database.db;
    await db
      .insertInto('key_webhook_secrets')
      .values({ key_id: 'key_reseal', secret: before.sealForKey('key_reseal', 'whsec_abc'), created_at: 0 })
      .execute();
    const after = new WebhookSecrets(new Sealer([newKey, oldKey]));
    // Rows sealed with the test gateway's own key cannot be opened here: logged and left as they are.
    await resealWebhookSecrets(db, after);
    const row = await db.selectFrom('key_webhook_secrets').select('secret').where('key_id', '=', 'key_reseal').executeTakeFirstOrThrow();
    expect(new WebhookSecrets(new Sealer([newKey])).openForKey('key_reseal', row.secret)).toBe('whsec_abc');
    await db.deleteFrom('key_webhook_secrets').where('key_id', '=', 'key_reseal').execute();
  });

  it('refuses a webhook URL that may not receive deliveries (400 param webhook) before anything is charged', async () => {
    const key = await newKey();
    for (const webhook of ['ftp://example.com/hook', 'not a url']) {
      const res = await submit(key, { prompt: 'x', model: 'local-1', webhook });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'webhook' });
    }
    const filterOnly = await submit(key, { prompt: 'x', model: 'local-1', webhook_events_filter: ['completed'] });
    expect(filterOnly.status).toBe(400);
    const unknownEvent = await submit(key, { prompt: 'x', model: 'local-1', webhook: receiver.url, webhook_events_filter: ['started'] });
    expect(unknownEvent.status).toBe(400);
    // Nothing was queued or charged for the refused requests.
    expect((await t.api.send('get', '/generations', { headers: auth(key) })).body.data).toEqual([]);
  });

  it('the internal API takes no webhook (its generations have no key to sign with): 400', async () => {
    const res = await t.internal.service('post', '/api/v1/creative/images/generations', { prompt: 'x', model: 'local-1', webhook: receiver.url });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_request');
  });

  it('a private address is refused when private networks are not allowed (the default)', async () => {
    const strict = await startTestGateway({});
    try {
      const key = (await strict.createKey()).key;
      for (const webhook of ['http://127.0.0.1:9/hook', 'http://169.254.169.254/latest', 'http://10.0.0.1/x']) {
        const res = await strict.api.send('post', '/images/generate', {
          body: { prompt: 'x', model: 'local-1', webhook },
          headers: { ...auth(key), Prefer: 'respond-async' },
        });
        expect(res.status).toBe(400);
        expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'webhook' });
      }
      expect(await strict.gateway.database.db.selectFrom('generations').select('id').execute()).toEqual([]);
    } finally {
      await strict.close();
    }
  });

  it('metadata and link-local addresses are refused even where private networks are allowed', async () => {
    const key = await newKey();
    for (const webhook of ['http://169.254.169.254/latest', 'http://[fd00:ec2::254]/latest', 'http://[::ffff:0:169.254.169.254]/x']) {
      const res = await t.api.send('post', '/images/generate', {
        body: { prompt: 'x', model: 'local-1', webhook },
        headers: { ...auth(key), Prefer: 'respond-async' },
      });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'webhook' });
    }
  });

  it('a receiver down at first (connection refused) gets the delivery once it is up: the outbox keeps and retries it', async () => {
    const key = await newKey();
    const secret = await secretOf(key);
    const later = await new WebhookReceiver().start();
    const { port } = new URL(later.url);
    await later.close();
    const res = await submit(key, { prompt: 'receiver down', model: 'local-1', webhook: `${later.url}/hook` });
    const delivery = () =>
      t.gateway.database.db
        .selectFrom('webhook_deliveries as d')
        .innerJoin('events as e', 'e.id', 'd.event_id')
        .select(['d.status', 'd.attempts', 'd.last_error', 'd.target_url'])
        .where('e.dedupe_key', '=', `generation:${res.body.id}`)
        .executeTakeFirst();
    await until(async () => ((await delivery())?.attempts ?? 0) >= 1, 'a first, failed attempt');
    expect(await delivery()).toMatchObject({ status: 'pending', target_url: `${later.url}/hook`, last_error: expect.any(String) });
    const back = await new WebhookReceiver().start(Number(port));
    back.secrets.push(secret);
    try {
      // The retry schedule's next step (5 s, +-20 %) on the gateway's clock.
      t.clock.advanceMs(7_000);
      await until(() => back.verified('generation.completed').length > 0, 'the retried delivery');
      // Recorded once the receiver's answer is back.
      await until(async () => (await delivery())?.status === 'succeeded', 'the delivery recorded as succeeded');
      expect(back.verified('generation.completed')).toHaveLength(1);
    } finally {
      await back.close();
    }
  });
});
