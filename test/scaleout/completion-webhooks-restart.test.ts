import { Webhook } from 'standardwebhooks';
import request from 'supertest';
import { type GatewayProcess, startGatewayProcess } from '../helpers/gateway-process';
import { createThrowawayDatabase, type ThrowawayDatabase } from '../helpers/test-database';
import { ApiClient, createKeyVia } from '../helpers/test-gateway';
import { until } from '../helpers/until';
import { WebhookReceiver } from '../helpers/webhook-receiver';

/**
 * Issue #17, "webhooks signed and delivered after a crash", on real SQLite gateway processes: the
 * generation settles while its receiver is down (connection refused), so its delivery waits in the
 * outbox; the gateway is SIGKILLed; the receiver comes up; a restarted gateway delivers it,
 * signed with the key's secret (read through the restarted gateway's client operation).
 */
describe('completion webhooks: receiver down, gateway SIGKILLed, restarted gateway delivers (SQLite)', () => {
  let database: ThrowawayDatabase;
  let env: Record<string, string>;
  const started: GatewayProcess[] = [];
  let receiver: WebhookReceiver | undefined;

  beforeAll(async () => {
    database = await createThrowawayDatabase('sqlite');
    env = { DATABASE_URL: database.url, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_POLL_INTERVAL_MS: '50', GENERATION_POLL_MS: '50' };
  });
  afterAll(async () => {
    await Promise.all(started.map((p) => p.stop('SIGKILL')));
    await receiver?.close();
    await database.drop();
  });

  it('the delivery queued by the killed process arrives from its successor once the receiver is up', async () => {
    const first = await startGatewayProcess(env);
    started.push(first);
    const created = await createKeyVia(new ApiClient(first.url), { credits_quota: 10, allowed_providers: ['local'] });
    const auth = { Authorization: `Bearer ${created.key}` };
    // An address nobody listens on yet (taken, then released).
    const probe = await new WebhookReceiver().start();
    const port = Number(new URL(probe.url).port);
    await probe.close();
    const submitted = await request(first.url)
      .post('/images/generate')
      .set({ ...auth, Prefer: 'respond-async' })
      .send({ prompt: 'a lighthouse', model: 'local-1', size: '32x32', webhook: `http://127.0.0.1:${port}/hook` });
    expect(submitted.status).toBe(202);
    const id = submitted.body.id as string;
    const statusOn = async (gateway: GatewayProcess) => {
      const res = await request(gateway.url).get(`/generations/${id}`).set(auth);
      return res.body.status as string;
    };
    await until(async () => (await statusOn(first)) === 'succeeded', 'the generation to succeed');
    // The first attempt was refused; wait until the process logged it, then kill the process.
    await until(() => first.output.join('').includes('webhook delivery attempt'), 'a first delivery attempt');
    await first.stop('SIGKILL');

    receiver = await new WebhookReceiver().start(port);
    const second = await startGatewayProcess(env);
    started.push(second);
    const secret = await request(second.url).get('/v1/webhook-secret').set(auth);
    expect(secret.status).toBe(200);
    // The retry schedule's second step is 5 s (+-20 %) after the refused attempt (it may be due already).
    await until(() => receiver!.received.length > 0, 'the delivery from the restarted gateway', 20_000);
    expect(receiver.received).toHaveLength(1);
    const [delivered] = receiver.received;
    // Verified here, not by the receiver: the delivery may arrive before the secret was read.
    const event = new Webhook(secret.body.secret as string).verify(delivered!.body, {
      'webhook-id': delivered!.id,
      'webhook-timestamp': delivered!.timestamp,
      'webhook-signature': delivered!.signature,
    });
    expect(event).toMatchObject({ type: 'generation.completed', data: { id, status: 'succeeded' } });
    expect(() =>
      new Webhook(`whsec_${Buffer.alloc(32, 1).toString('base64')}`).verify(delivered!.body, {
        'webhook-id': delivered!.id,
        'webhook-timestamp': delivered!.timestamp,
        'webhook-signature': delivered!.signature,
      }),
    ).toThrow();
  });
});
