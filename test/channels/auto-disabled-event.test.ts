import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
import { type ThrowawayDatabase, createThrowawayDatabase } from '../helpers/test-database';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';
import { WebhookReceiver } from '../helpers/webhook-receiver';

/**
 * Issue #29 §8: channel.auto_disabled is emitted with the update that auto-disables the channel, once,
 * however many replicas see the account error (only the one whose conditional update changed the row
 * emits). Two gateways on one database stand for two replicas.
 */
const API_KEY = 'ark-auto-disabled-key-0001';
const SEALING_KEY = 'a1'.repeat(32);

describe('channel.auto_disabled webhook event', () => {
  let ark: FakeImagesApi;
  let database: ThrowawayDatabase;
  let receiver: WebhookReceiver;
  let replicas: TestGateway[];

  beforeAll(async () => {
    ark = await startFakeImagesApi({ apiKey: API_KEY, flavour: 'ark' });
    receiver = await new WebhookReceiver().start();
    database = await createThrowawayDatabase();
    const env = {
      DATABASE_URL: database.url,
      CHANNEL_SEALING_KEY: SEALING_KEY,
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      WEBHOOK_POLL_INTERVAL_MS: '20',
      PROVIDER_JIMENG_RETRY_BASE_DELAY_MS: '5',
    };
    replicas = [await startTestGateway(env), await startTestGateway(env)];
  });
  afterAll(async () => {
    for (const replica of replicas) await replica.close();
    await receiver.close();
    await ark.close();
    await database.drop();
  });

  const eventRows = () => replicas[0]!.gateway.database.db.selectFrom('events').select(['id', 'payload']).where('type', '=', 'channel.auto_disabled').execute();

  it('is delivered once when both replicas hit the revoked account; not again while it stays disabled', async () => {
    const [a, b] = replicas as [TestGateway, TestGateway];
    const endpoint = await a.api.admin('post', '/admin/webhooks', { url: receiver.url, event_types: ['channel.auto_disabled'] });
    expect(endpoint.status).toBe(201);
    receiver.secrets.push(endpoint.body.secret);
    const channel = await a.api.admin('post', '/admin/channels', {
      name: 'ark to be revoked',
      provider: 'jimeng',
      transport: 'ark',
      base_url: ark.url,
      models: [{ model: 'jimeng-4.5' }],
      credentials: { api_key: API_KEY },
    });
    expect(channel.status).toBe(201);
    const channelId = channel.body.id as string;
    const { key } = await a.createKey({ allowed_providers: ['jimeng'], credits_quota: 1000 });
    // Both replicas have the channel enabled in their directory before the account is revoked (the other
    // replica reads new channels within a second: docs/operators/channels.md).
    for (const [i, replica] of replicas.entries()) {
      await until(
        async () => (await replica.api.client(key, { prompt: 'warm up', model: 'jimeng-4.5', size: '2048x2048' })).status === 200,
        `replica ${i} to serve the new channel`,
        10_000,
      );
    }

    ark.setApiKey('revoked-by-the-provider');
    const failing = await Promise.all(
      [a, b, a, b, a, b].map((replica, i) => replica.api.client(key, { prompt: `after revocation ${i}`, model: 'jimeng-4.5', size: '2048x2048' })),
    );
    expect(failing.every((res) => res.status !== 200)).toBe(true);
    // Both replicas did send to the revoked account (so both tried to disable it).
    expect(ark.unauthorizedAt.length).toBeGreaterThanOrEqual(2);
    expect((await a.api.admin('get', `/admin/channels/${channelId}`)).body.status).toBe('auto_disabled');

    await until(() => receiver.verified('channel.auto_disabled').length >= 1, 'the channel.auto_disabled delivery');
    const event = receiver.verified('channel.auto_disabled')[0]!.event!;
    expect(event.data).toEqual({ channel_id: channelId, provider: 'jimeng', reason: expect.stringContaining('401'), status_code: 401 });
    // A failing test of the disabled channel changes nothing, so emits nothing.
    expect((await b.api.admin('post', `/admin/channels/${channelId}/test`)).body.outcome).toBe('failed');
    expect(await eventRows()).toHaveLength(1);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(receiver.verified('channel.auto_disabled')).toHaveLength(1);
  });
});
