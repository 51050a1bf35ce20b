import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';
import { WebhookReceiver } from '../helpers/webhook-receiver';
import { cliRunner } from './cli-harness';

describe('admin CLI: webhooks (createWebhookEndpoint ... listWebhookDeliveries)', () => {
  let t: TestGateway;
  let receiver: WebhookReceiver;
  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    t = await startTestGateway({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_POLL_INTERVAL_MS: '20' });
  });
  afterAll(async () => {
    await t.close();
    await receiver.close();
  });
  const { cli, json, usageError, help } = cliRunner(() => t);

  it.each([[['webhooks', '--help']], [['webhooks', 'create', '-h']], [['webhooks', 'rotate-secret', '--help']], [['webhooks', 'deliveries', '-h']]])(
    '%j prints help and exits 0',
    async (args) => {
      await help(args);
    },
  );

  it.each([
    [['webhooks', 'create', '--url', 'http://127.0.0.1:1'], /required option '--events <list>' not specified/],
    [['webhooks', 'update', 'whep_x'], /nothing to change/],
    [['webhooks', 'update', 'whep_x', '--enable', '--disable'], /contradict/],
    [['webhooks', 'rotate-secret', 'whep_x', '--overlap-seconds', '-1'], /'-1' is invalid/],
    [['webhooks', 'deliveries'], /missing required argument 'id'/],
    [['webhooks', 'bogus'], /unknown command 'bogus'/],
  ])('usage error %j exits 2', async (args, message) => {
    await usageError(args, message);
  });

  it('create (secret once), list, get, update, disable/enable, test, deliveries, rotate-secret, delete', async () => {
    const created = await json(['webhooks', 'create', '--url', receiver.url, '--events', 'key.disabled,key.expired', '--description', 'ops']);
    expect(created).toMatchObject({ url: receiver.url, event_types: ['key.disabled', 'key.expired'], description: 'ops', status: 'enabled' });
    expect(created.secret).toMatch(/^whsec_/);
    receiver.secrets.push(created.secret);

    const list = await cli(['webhooks', 'list']);
    expect(list.stdout.split('\n')[0]).toMatch(/^ID\s+URL\s+STATUS\s+EVENTS\s+FAILING_SINCE\s+DESCRIPTION$/);
    expect(list.stdout).toMatch(new RegExp(`^${created.id}\\s+${receiver.url}\\s+enabled\\s+key.disabled,key.expired\\s+-\\s+ops$`, 'm'));
    const got = await cli(['webhooks', 'get', created.id]);
    expect(got.stdout).toMatch(/^description:\s+ops$/m);
    expect(got.stdout).not.toContain(created.secret);

    expect(await json(['webhooks', 'update', created.id, '--events', 'key.expired', '--description', 'renamed'])).toMatchObject({
      event_types: ['key.expired'],
      description: 'renamed',
    });
    expect(await json(['webhooks', 'update', created.id, '--disable'])).toMatchObject({ status: 'disabled' });
    expect(await json(['webhooks', 'update', created.id, '--enable'])).toMatchObject({ status: 'enabled', disabled_reason: null });

    const queued = await json(['webhooks', 'test', created.id]);
    await until(() => receiver.verified('webhook.test').some((r) => r.id === queued.event_id), 'the test event');
    await until(async () => (await json(['webhooks', 'deliveries', created.id, '--status', 'succeeded'])).data.length === 1, 'the delivery record');
    const deliveries = await cli(['webhooks', 'deliveries', created.id, '--limit', '5']);
    expect(deliveries.stdout.split('\n')[0]).toMatch(/^ID\s+EVENT\s+STATUS\s+ATTEMPTS\s+LAST_STATUS\s+LAST_ERROR\s+CREATED$/);
    expect(deliveries.stdout).toMatch(/\swebhook\.test\s+succeeded\s+1\s+200\s/);

    const rotated = await json(['webhooks', 'rotate-secret', created.id, '--overlap-seconds', '60']);
    expect(rotated.secret).toMatch(/^whsec_/);
    expect(rotated.secret).not.toBe(created.secret);
    expect(Date.parse(rotated.previous_secret_expires_at)).toBeGreaterThan(Date.now());

    expect(await cli(['webhooks', 'delete', created.id])).toMatchObject({ code: 0, stdout: `deleted ${created.id}\n` });
    const gone = await cli(['webhooks', 'get', created.id]);
    expect(gone).toMatchObject({ code: 1, stdout: '' });
    expect(gone.stderr).toContain('404 webhook_endpoint_not_found');
  });

  it("the gateway's --url goes before the resource; the endpoint's --url after `webhooks create`", async () => {
    const created = await json(['--url', t.gateway.url, 'webhooks', 'create', '--url', `${receiver.url}/second`, '--events', 'key.disabled'], {
      env: { GATEWAY_URL: 'http://127.0.0.1:9' },
    });
    expect(created.url).toBe(`${receiver.url}/second`);
    expect((await cli(['webhooks', 'delete', created.id, '--json'])).code).toBe(0);
  });

  it("API errors exit 1 with the API's message", async () => {
    const unknownEvent = await cli(['webhooks', 'create', '--url', receiver.url, '--events', 'key.exploded']);
    expect(unknownEvent).toMatchObject({ code: 1, stdout: '' });
    expect(unknownEvent.stderr).toMatch(/^error: 400 /);
    const missing = await cli(['webhooks', 'test', 'whep_nope']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('404 webhook_endpoint_not_found');
  });
});
