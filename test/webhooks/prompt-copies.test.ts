import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { applyPromptRetention } from '../../src/maintenance/prompt-retention';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { testPng } from '../helpers/test-images';
import { until } from '../helpers/until';
import { WebhookReceiver } from '../helpers/webhook-receiver';

/**
 * No copy of a prompt outlives what its policy keeps, and none reaches a log line at any level: an
 * upstream's error text that quotes the prompt (re-wrapped, and past the 500 characters the gateway
 * keeps of it) leaves no piece of it in the answer, the generation's error, a channel's
 * `disabled_reason`, the channel.auto_disabled event or a log line; a completion webhook retried
 * after its project tightened to `none` carries no prompt, and the sweep clears the `events` row, the
 * stored error text and the moderation hook's reason.
 *
 * The upstream is a small Ark-style images API here: it quotes the prompt in its error messages as
 * upstreams do ("the prompt ... could not be processed"), with its whitespace changed.
 */
/** 120 distinctive words, about 800 characters: any piece of the prompt holds `zqw`. */
const PROMPT = Array.from({ length: 120 }, (_, i) => `zqw${i}`).join('  ');
const LEAK = /zqw\d/;
const ARK_KEY = 'ark-prompt-copies-key-0001';

type Mode = 'ok' | 'quote' | 'quote-account';

interface QuotingUpstream {
  url: string;
  mode: Mode;
  close(): Promise<void>;
}

async function startQuotingUpstream(): Promise<QuotingUpstream> {
  const image = testPng(2048, 2048).toString('base64');
  const upstream: QuotingUpstream = { url: '', mode: 'ok', close: async () => undefined };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString()) as { prompt: string };
      // The quote re-wrapped, as an upstream formatting its message would.
      const quoted = body.prompt.replace(/\s+/g, '\n   ');
      const answer = (status: number, payload: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(payload));
      if (upstream.mode === 'quote')
        return answer(500, { error: { code: 'InternalServiceError', message: `The prompt "${quoted}" could not be processed`, type: 'server_error' } });
      if (upstream.mode === 'quote-account')
        return answer(401, { error: { code: 'AuthenticationError', message: `The API key was refused for the request "${quoted}"`, type: 'unauthorized' } });
      return answer(200, { data: [{ b64_json: image, size: '2048x2048' }], usage: { generated_images: 1 } });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  upstream.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v3`;
  upstream.close = async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  };
  return upstream;
}

describe('prompts outlive neither their policy nor their request', () => {
  let t: TestGateway;
  let upstream: QuotingUpstream;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    upstream = await startQuotingUpstream();
    receiver = await new WebhookReceiver().start();
    t = await startTestGateway({
      LOG_LEVEL: 'trace',
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      WEBHOOK_POLL_INTERVAL_MS: '20',
      GENERATION_POLL_MS: '50',
      PROVIDER_JIMENG_RETRY_BASE_DELAY_MS: '1',
    });
  });
  afterAll(async () => {
    await t.close();
    await receiver.close();
    await upstream.close();
  });

  const auth = (key: string) => ({ Authorization: `Bearer ${key}` });

  /** A channel on the quoting upstream, and a key that reaches it; waits until the channel serves. */
  async function channelAndKey(): Promise<{ channelId: string; key: string }> {
    upstream.mode = 'ok';
    const channel = await t.api.admin('post', '/admin/channels', {
      name: `quoting ${Date.now()}`,
      provider: 'jimeng',
      transport: 'ark',
      base_url: upstream.url,
      models: [{ model: 'jimeng-4.5' }],
      credentials: { api_key: ARK_KEY },
    });
    expect(channel.status).toBe(201);
    const { key } = await t.createKey({ allowed_providers: ['jimeng'], credits_quota: 10_000 });
    await until(
      async () => (await t.api.client(key, { prompt: 'warm up', model: 'jimeng-4.5', size: '2048x2048', response_format: 'b64_json' })).status === 200,
      'the new channel serves',
    );
    return { channelId: channel.body.id as string, key };
  }

  it('an upstream error quoting the prompt re-wrapped and past 500 characters: no piece of it in the answer, the generation or any log line', async () => {
    const { key } = await channelAndKey();
    upstream.mode = 'quote';
    const failed = await t.api.client(key, { prompt: PROMPT, model: 'jimeng-4.5', size: '2048x2048', response_format: 'b64_json' });
    expect(failed.status).toBe(502);
    expect(failed.body.error.message).toContain('[prompt]');
    expect(failed.body.error.message).not.toMatch(LEAK);

    const listed = await t.api.send('get', '/generations', { headers: auth(key) });
    const generation = (listed.body.data as Array<{ status: string; error: { message: string } | null }>).find((row) => row.status === 'failed');
    expect(generation?.error?.message).toContain('[prompt]');
    expect(generation?.error?.message).not.toMatch(LEAK);
    const stored = await t.gateway.database.db.selectFrom('generations').select('error_message').where('status', '=', 'failed').execute();
    expect(stored.length).toBeGreaterThan(0);
    for (const row of stored) expect(row.error_message ?? '').not.toMatch(LEAK);
    // The prompt reached the upstream, so a leak would show; no log line, trace included, holds a piece of it.
    expect(t.logs.length).toBeGreaterThan(3);
    expect(t.logs.filter((line) => LEAK.test(line))).toEqual([]);
  });

  it("an account error quoting the prompt: the channel's disabled_reason, the channel.auto_disabled event and its log line hold none of it", async () => {
    const endpoint = await t.api.admin('post', '/admin/webhooks', { url: receiver.url, event_types: ['channel.auto_disabled'] });
    expect(endpoint.status).toBe(201);
    receiver.secrets.push(endpoint.body.secret as string);
    const { channelId, key } = await channelAndKey();
    upstream.mode = 'quote-account';
    const refused = await t.api.client(key, { prompt: PROMPT, model: 'jimeng-4.5', size: '2048x2048', response_format: 'b64_json' });
    expect(refused.status).toBeGreaterThanOrEqual(500);
    expect(JSON.stringify(refused.body)).not.toMatch(LEAK);

    const channel = await t.api.admin('get', `/admin/channels/${channelId}`);
    expect(channel.body.status).toBe('auto_disabled');
    expect(channel.body.disabled_reason).toContain('[prompt]');
    expect(channel.body.disabled_reason).not.toMatch(LEAK);
    const events = await t.gateway.database.db.selectFrom('events').select('payload').where('type', '=', 'channel.auto_disabled').execute();
    // The first test's channel, on the same upstream, may be disabled too.
    expect(events.length).toBeGreaterThanOrEqual(1);
    for (const event of events) expect(event.payload).not.toMatch(LEAK);
    await until(() => receiver.verified('channel.auto_disabled').length > 0, 'the channel.auto_disabled delivery');
    expect(receiver.verified('channel.auto_disabled')[0]!.body).not.toMatch(LEAK);
    expect(t.logs.some((line) => line.includes('channel auto-disabled'))).toBe(true);
    expect(t.logs.filter((line) => LEAK.test(line))).toEqual([]);
  });

  it('a completion webhook retried after its project tightened to none carries no prompt; the sweep leaves none in its events row', async () => {
    const project = await t.api.admin('post', '/admin/projects', {
      name: 'p',
      owner: 'o',
      credits_quota: 1000,
      quota_period_days: 30,
      prompt_retention: 'full',
    });
    expect(project.status).toBe(201);
    const { key } = await t.createKey({ project_id: project.body.id, allowed_providers: ['local'] });
    const secret = (await t.api.send('get', '/v1/webhook-secret', { headers: auth(key) })).body.secret as string;
    receiver.secrets.push(secret);
    receiver.answer(500);
    const queued = await t.api.send('post', '/images/generate', {
      body: { prompt: PROMPT, model: 'local-1', size: '32x32', webhook: `${receiver.url}/completion` },
      headers: { ...auth(key), Prefer: 'respond-async' },
    });
    expect(queued.status).toBe(202);
    const id = queued.body.id as string;
    const deliveries = () => receiver.verified('generation.completed').filter((r) => (r.event!.data as { id: string }).id === id);
    // Under `full` the first delivery carries the prompt; the receiver answers 500 and it is retried.
    await until(() => deliveries().length === 1, 'the first completion delivery');
    expect(deliveries()[0]!.event!.data.prompt).toBe(PROMPT);

    const tightened = await t.api.admin('patch', `/admin/projects/${project.body.id}`, { prompt_retention: 'none' });
    expect(tightened.status).toBe(200);
    // The retry schedule's next step (5 s, +-20 %) on the gateway's clock.
    t.clock.advanceMs(7_000);
    await until(() => deliveries().length === 2, 'the retried completion delivery');
    const retried = deliveries()[1]!;
    expect(retried.event!.data).toMatchObject({ id, prompt: null, prompt_sha256: null, prompt_retention: 'none' });
    expect(retried.body).not.toMatch(LEAK);

    await applyPromptRetention(t.gateway.database.db, 'full', t.clock.now());
    const rows = await t.gateway.database.db.selectFrom('events').select('payload').where('dedupe_key', '=', `generation:${id}`).execute();
    expect(rows).toHaveLength(1);
    expect(rows[0]!.payload).not.toMatch(LEAK);
  });

  it("the sweep clears a kept generation's error text and its moderation hook's reason where they quote the prompt", async () => {
    const project = await t.api.admin('post', '/admin/projects', {
      name: 'q',
      owner: 'o',
      credits_quota: 1000,
      quota_period_days: 30,
      prompt_retention: 'full',
    });
    const { key } = await t.createKey({ project_id: project.body.id, allowed_providers: ['local'] });
    const done = await t.api.client(key, { prompt: PROMPT, model: 'local-1', size: '32x32' });
    expect(done.status).toBe(200);
    const [row] = await t.gateway.database.db.selectFrom('generations').select('id').where('project_id', '=', project.body.id).execute();
    // Texts kept while the policy was `full` (a hook's reason, an error written by an older gateway), each quoting the prompt re-wrapped.
    const rewrapped = PROMPT.replace(/\s+/g, ' ');
    await t.gateway.database.db
      .updateTable('generations')
      .set({
        moderation_decision: 'allow',
        moderation_latency_ms: 3,
        moderation_reason: `allowed "${rewrapped.slice(0, 300)}"`,
        error_message: `upstream said: ${rewrapped.slice(0, 480)}…`,
      })
      .where('id', '=', row!.id)
      .execute();
    expect((await t.api.admin('patch', `/admin/projects/${project.body.id}`, { prompt_retention: 'none' })).status).toBe(200);
    expect(await applyPromptRetention(t.gateway.database.db, 'full', t.clock.now())).toBeGreaterThanOrEqual(1);

    const read = await t.api.send('get', `/generations/${row!.id}`, { headers: auth(key) });
    expect(read.body).toMatchObject({ prompt: null, prompt_retention: 'none', moderation: { reason: 'allowed "[prompt]"' } });
    const stored = await t.gateway.database.db
      .selectFrom('generations')
      .select(['error_message', 'moderation_reason', 'request'])
      .where('id', '=', row!.id)
      .executeTakeFirstOrThrow();
    expect(stored.error_message).toBe('upstream said: [prompt]…');
    expect(JSON.stringify(stored)).not.toMatch(LEAK);
  });
});
