import { type GatewayProcess, startGatewayProcess } from '../helpers/gateway-process';
import { createThrowawayDatabase, type ThrowawayDatabase } from '../helpers/test-database';
import { TEST_REDIS_URL, throwawayRedisPrefix } from '../helpers/test-redis';
import { ApiClient, createKeyVia, localRequest } from '../helpers/test-gateway';
import { until } from '../helpers/until';
import { WebhookReceiver } from '../helpers/webhook-receiver';

const webhookEnv = { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_POLL_INTERVAL_MS: '50' };

async function subscribe(api: ApiClient, receiver: WebhookReceiver, eventTypes: string[]): Promise<string> {
  const res = await api.admin('post', '/admin/webhooks', { url: receiver.url, event_types: eventTypes });
  if (res.status !== 201) throw new Error(`createWebhookEndpoint failed: ${res.status} ${res.text}`);
  receiver.secrets.push(res.body.secret);
  return res.body.id as string;
}

describe('3 replicas on PostgreSQL + Redis racing across quota thresholds', () => {
  let database: ThrowawayDatabase;
  let redis: ReturnType<typeof throwawayRedisPrefix>;
  let processes: GatewayProcess[] = [];
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    database = await createThrowawayDatabase('postgres');
    redis = throwawayRedisPrefix();
    const env = { DATABASE_URL: database.url, REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: redis.prefix, ...webhookEnv };
    processes = await Promise.all([startGatewayProcess(env), startGatewayProcess(env), startGatewayProcess(env)]);
  });
  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop()));
    await receiver.close();
    await database.drop();
    await redis.drop();
  });

  it('exactly one threshold_reached per threshold and one exhausted, each delivered once and verified', async () => {
    const replicas = processes.map((p) => new ApiClient(p.url));
    await subscribe(replicas[0]!, receiver, ['key.quota.threshold_reached', 'key.quota.exhausted']);
    const { id, key } = await createKeyVia(replicas[1]!, { credits_quota: 20, alert_thresholds: [25, 50, 75, 100] });
    const statuses = await Promise.all(Array.from({ length: 60 }, (_, i) => replicas[i % 3]!.client(key, localRequest()).then((r) => r.status)));
    expect(statuses.filter((s) => s === 200)).toHaveLength(20);
    const mine = (type: string) => receiver.verified(type).filter((r) => r.event?.data.key_id === id);
    await until(() => mine('key.quota.threshold_reached').length >= 4 && mine('key.quota.exhausted').length >= 1, 'the quota events');
    // Let any duplicate that was going to arrive arrive: every delivery of the outbox is settled.
    const pending = async () => (await replicas[2]!.admin('get', '/admin/webhooks')).body.data[0].id as string;
    const endpointId = await pending();
    await until(
      async () =>
        (await replicas[2]!.admin('get', `/admin/webhooks/${endpointId}/deliveries`)).body.data.every((d: { status: string }) => d.status === 'succeeded'),
      'deliveries settled',
    );
    expect(
      mine('key.quota.threshold_reached')
        .map((r) => r.event?.data.threshold)
        .sort((a, b) => Number(a) - Number(b)),
    ).toEqual([25, 50, 75, 100]);
    expect(mine('key.quota.exhausted')).toHaveLength(1);
    expect(new Set(receiver.received.map((r) => r.id)).size).toBe(receiver.received.length);
  });

  // Many keys at once: the replicas send their reservations in batches over distinct keys (statement-batcher.ts),
  // interleaved with the single-key transactions of the reservations that cross a threshold.
  it('20 keys x 15 requests at once over the replicas: each key charged exactly its quota, one event per threshold and key', async () => {
    const replicas = processes.map((p) => new ApiClient(p.url));
    const keys = await Promise.all(Array.from({ length: 20 }, () => createKeyVia(replicas[0]!, { credits_quota: 10, alert_thresholds: [50, 100] })));
    const results = await Promise.all(
      keys.flatMap(({ key }, k) =>
        Array.from({ length: 15 }, (_, i) =>
          replicas[(k + i) % 3]!.client(key, localRequest()).then((r) => ({ k, status: r.status, code: r.body?.error?.code as string | undefined })),
        ),
      ),
    );
    for (const [k, { id }] of keys.entries()) {
      const mineOf = results.filter((r) => r.k === k);
      expect([id, mineOf.filter((r) => r.status === 200).length]).toEqual([id, 10]);
      expect([id, mineOf.filter((r) => r.status !== 200).map((r) => `${r.status} ${r.code}`)]).toEqual([
        id,
        Array.from({ length: 5 }, () => '402 quota_exceeded'),
      ]);
      expect([id, await replicas[1]!.creditsUsed(id)]).toEqual([id, 10]);
    }
    const events = (type: string, keyId: string) => receiver.verified(type).filter((r) => r.event?.data.key_id === keyId);
    await until(
      () => keys.every(({ id }) => events('key.quota.threshold_reached', id).length >= 2 && events('key.quota.exhausted', id).length >= 1),
      "every key's quota events",
    );
    const endpointId = (await replicas[2]!.admin('get', '/admin/webhooks')).body.data[0].id as string;
    await until(
      async () =>
        (await replicas[2]!.admin('get', `/admin/webhooks/${endpointId}/deliveries?limit=100`)).body.data.every(
          (d: { status: string }) => d.status === 'succeeded',
        ),
      'deliveries settled',
    );
    for (const { id } of keys) {
      expect([
        id,
        events('key.quota.threshold_reached', id)
          .map((r) => r.event?.data.threshold)
          .sort((a, b) => Number(a) - Number(b)),
      ]).toEqual([id, [50, 100]]);
      expect(events('key.quota.exhausted', id)).toHaveLength(1);
    }
  }, 120_000);
});

describe('a gateway SIGKILLed mid-delivery, then restarted (SQLite)', () => {
  let database: ThrowawayDatabase;
  let receiver: WebhookReceiver;
  let processes: GatewayProcess[] = [];

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    database = await createThrowawayDatabase('sqlite');
  });
  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop()));
    await receiver.close();
    await database.drop();
  });

  it('every event arrives, verified, the interrupted one again with the same webhook-id', async () => {
    const env = { DATABASE_URL: database.url, ...webhookEnv, WEBHOOK_LEASE_MS: '1000' };
    const first = await startGatewayProcess(env);
    processes.push(first);
    const api = new ApiClient(first.url);
    await subscribe(api, receiver, ['key.disabled']);
    // The first delivery is held open by the receiver while the gateway dies.
    receiver.answer('hold');
    const keys = [await createKeyVia(api), await createKeyVia(api), await createKeyVia(api)];
    await api.admin('delete', `/admin/keys/${keys[0]!.id}`);
    await until(() => receiver.received.length === 1, 'the first delivery to be in flight');
    const interrupted = receiver.received[0]!.id;
    await api.admin('delete', `/admin/keys/${keys[1]!.id}`);
    await first.stop('SIGKILL');
    receiver.release();

    const second = await startGatewayProcess(env);
    processes.push(second);
    await new ApiClient(second.url).admin('delete', `/admin/keys/${keys[2]!.id}`);
    const disabled = (keyId: string) => receiver.verified('key.disabled').filter((r) => r.event?.data.key_id === keyId);
    // The interrupted delivery comes again once its lease lapses; the other two may arrive before it (seen under load).
    const receipts = (id: string) => receiver.received.filter((r) => r.id === id).length;
    await until(
      () => keys.every((k) => disabled(k.id).length >= 1) && receipts(interrupted) >= 2,
      'all three key.disabled events and the interrupted one again',
    );
    expect(receipts(interrupted)).toBeGreaterThanOrEqual(2);
    expect(receiver.received.every((r) => r.event !== undefined)).toBe(true);
  });
});
