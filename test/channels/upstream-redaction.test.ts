import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';

/**
 * Issue #29 §3: an upstream that echoes the Authorization header (and the key) in its error text must
 * not get the account's credentials into any outlet: client answers (sync and Prefer: wait, both
 * APIs), stored generations, the channel's disabled_reason, testChannel's answer, the logs.
 */
const CHANNEL_KEY = 'ark-channel-secret-key-0001';
const ENV_KEY = 'env-compat-secret-key-0002';
const SECRETS = [CHANNEL_KEY, ENV_KEY];

describe('upstream error text is redacted before it is answered, stored or logged', () => {
  let ark: FakeImagesApi;
  let compat: FakeImagesApi;
  let t: TestGateway;
  let key: string;
  let channelId: string;

  beforeAll(async () => {
    ark = await startFakeImagesApi({ apiKey: CHANNEL_KEY, flavour: 'ark' });
    compat = await startFakeImagesApi({ apiKey: ENV_KEY, flavour: 'openai' });
    t = await startTestGateway({
      OPENAI_COMPAT_BASE_URL: `${compat.url}/v1`,
      OPENAI_COMPAT_API_KEY: ENV_KEY,
      OPENAI_COMPAT_PROVIDER_NAME: 'selfhosted',
      MODEL_CATALOG: JSON.stringify([
        {
          model: 'jimeng-4.5',
          provider: 'jimeng',
          transport: 'ark',
          upstream_model: 'doubao-seedream-4-5-251128',
          credits_per_image: 1,
          default_size: '2048x2048',
        },
        { model: 'flux-dev', provider: 'selfhosted', upstream_model: 'flux-dev', credits_per_image: 1, default_size: '2048x2048' },
      ]),
      PROVIDER_JIMENG_RETRY_BASE_DELAY_MS: '5',
      PROVIDER_SELFHOSTED_RETRY_BASE_DELAY_MS: '5',
      GENERATION_POLL_MS: '50',
    });
    ({ key } = await t.createKey({ allowed_providers: ['jimeng', 'selfhosted'], credits_quota: 1000 }));
    const created = await t.api.admin('post', '/admin/channels', {
      name: 'echoing ark',
      provider: 'jimeng',
      transport: 'ark',
      base_url: ark.url,
      models: [{ model: 'jimeng-4.5' }],
      credentials: { api_key: CHANNEL_KEY },
    });
    expect(created.status).toBe(201);
    channelId = created.body.id as string;
  });
  afterAll(async () => {
    await t.close();
    await ark.close();
    await compat.close();
  });

  const expectRedacted = (text: unknown) => {
    expect(typeof text).toBe('string');
    for (const secret of SECRETS) expect(text).not.toContain(secret);
    expect(text).toContain('[redacted]');
  };

  it.each([
    ['/images/generate', 'jimeng-4.5'],
    ['/v1/images/generations', 'jimeng-4.5'],
    ['/images/generate', 'flux-dev'],
    ['/v1/images/generations', 'flux-dev'],
  ])('a synchronous %s of %s answers 502 without the key', async (path, model) => {
    const res = await t.api.client(key, { prompt: 'x [echo:InternalServiceError:500]', model, size: '2048x2048' }, path);
    expect(res.status).toBe(502);
    expect(res.body.error.code).toBe('provider_error');
    expectRedacted(res.body.error.message);
  });

  it('Prefer: wait answers, and GET /generations/{id} shows, the redacted message', async () => {
    const res = await t.api.send('post', '/images/generate', {
      body: { prompt: 'y [echo:InternalServiceError:500]', model: 'jimeng-4.5', size: '2048x2048' },
      headers: { Authorization: `Bearer ${key}`, Prefer: 'respond-async, wait=10' },
    });
    expect(JSON.stringify(res.body)).not.toContain(CHANNEL_KEY);
    const id = (res.body.id ?? res.body.error?.generation_id) as string | undefined;
    const listed = await t.api.send('get', '/generations', { headers: { Authorization: `Bearer ${key}` } });
    const generationId = id ?? (listed.body.data as Array<{ id: string }>)[0]!.id;
    let stored: { status: string; error?: { message: string } } = { status: 'queued' };
    await until(async () => {
      stored = (await t.api.send('get', `/generations/${generationId}`, { headers: { Authorization: `Bearer ${key}` } })).body;
      return stored.status === 'failed';
    }, 'the generation to fail');
    expectRedacted(stored.error?.message);
    if (res.status !== 202) expectRedacted(res.body.error.message);
  });

  it('testChannel answers, and disabled_reason keeps, the redacted text', async () => {
    ark.setMode('echo');
    try {
      const tested = await t.api.admin('post', `/admin/channels/${channelId}/test`);
      expect(tested.status).toBe(200);
      expect(tested.body.outcome).toBe('failed');
      // This fake is on loopback: testChannel relays no answer of a private upstream at all.
      for (const secret of SECRETS) expect(tested.body.message).not.toContain(secret);
      expect(tested.body.channel.status).toBe('auto_disabled');
      expectRedacted(tested.body.channel.disabled_reason);
      const channel = await t.api.admin('get', `/admin/channels/${channelId}`);
      expectRedacted(channel.body.disabled_reason);
    } finally {
      ark.setMode('normal');
    }
  });

  it('no log line carries a key', () => {
    expect(t.logs.length).toBeGreaterThan(0);
    const logs = t.logs.join('\n');
    for (const secret of SECRETS) expect(logs).not.toContain(secret);
    // The failures above were logged (so the check looked at upstream text).
    expect(logs).toContain('[redacted]');
  });
});
