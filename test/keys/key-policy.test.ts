import type { FakeImagesApi } from '../fakes/fake-images-api';
import { startArkGateway } from '../helpers/ark-gateway';
import { openaiClient } from '../helpers/openai-sdk';
import { type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';

const validKey = { name: 'policy', owner: 'policy@example.com', credits_quota: 100, quota_period_days: 30, allowed_providers: ['local'] };

describe('key policy: max_concurrent, allowed_ips, allowed_models, metadata, alert_thresholds', () => {
  let ark: FakeImagesApi;
  let t: TestGateway;
  beforeAll(async () => {
    ({ t, ark } = await startArkGateway());
  });
  afterAll(() => t.close());
  const used = (id: string) => t.api.creditsUsed(id);

  describe('on create, read and update', () => {
    it('defaults: no cap, anywhere, every model, empty metadata, thresholds [80, 100]', async () => {
      const res = await t.api.admin('post', '/admin/keys', validKey);
      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({ max_concurrent: null, allowed_ips: null, allowed_models: null, metadata: {}, alert_thresholds: [80, 100] });
    });

    it('stores the policy given on create, shows it on read, changes it on update', async () => {
      const policy = {
        max_concurrent: 2,
        allowed_ips: ['10.0.0.0/8', '2001:db8::/32', '127.0.0.1'],
        allowed_models: ['local-1'],
        metadata: { team: 'design', cost_center: '4711' },
        alert_thresholds: [100, 50],
      };
      const created = await t.api.admin('post', '/admin/keys', { ...validKey, ...policy });
      expect(created.status).toBe(201);
      expect(created.body).toMatchObject({ ...policy, alert_thresholds: [50, 100] });
      const read = await t.api.admin('get', `/admin/keys/${created.body.id}`);
      expect(read.body).toMatchObject({ ...policy, alert_thresholds: [50, 100] });
      const updated = await t.api.admin('patch', `/admin/keys/${created.body.id}`, {
        max_concurrent: null,
        allowed_ips: null,
        allowed_models: ['local-1', 'jimeng-4.5'],
        metadata: { team: 'ops' },
        alert_thresholds: [],
      });
      expect(updated.status).toBe(200);
      expect(updated.body).toMatchObject({
        max_concurrent: null,
        allowed_ips: null,
        allowed_models: ['local-1', 'jimeng-4.5'],
        metadata: { team: 'ops' },
        alert_thresholds: [],
      });
    });

    it.each([
      [{ allowed_ips: ['10.0.0.0/33'] }, 'allowed_ips'],
      [{ allowed_ips: ['not-an-ip'] }, 'allowed_ips'],
      [{ allowed_ips: ['10.0.0.1/8/1'] }, 'allowed_ips'],
      [{ allowed_models: ['dall-e-9'] }, 'allowed_models'],
      [{ max_concurrent: 0 }, 'max_concurrent'],
      [{ metadata: { 'bad name': 'x' } }, 'metadata'],
      [{ metadata: { team: 7 } }, 'metadata'],
      [{ metadata: { nested: { a: 'b' } } }, 'metadata'],
      [{ metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) }, 'metadata'],
      [{ metadata: { long: 'x'.repeat(501) } }, 'metadata'],
      [{ alert_thresholds: [0] }, 'alert_thresholds'],
      [{ alert_thresholds: [101] }, 'alert_thresholds'],
      [{ alert_thresholds: [80, 80] }, 'alert_thresholds'],
    ])('400 invalid_request for %j (create and update)', async (policy, param) => {
      const created = await t.api.admin('post', '/admin/keys', { ...validKey, ...policy });
      expect(created.status).toBe(400);
      expect(created.body.error).toMatchObject({ code: 'invalid_request' });
      expect(created.body.error.param).toContain(param);
      const { id } = await t.createKey();
      const updated = await t.api.admin('patch', `/admin/keys/${id}`, policy);
      expect(updated.status).toBe(400);
      expect(updated.body.error.param).toContain(param);
    });

    it('listKeys filters by one metadata entry (metadata=name:value)', async () => {
      const owner = `meta-${Date.now()}@example.com`;
      const design = await t.createKey({ owner, metadata: { team: 'design', env: 'prod' } });
      await t.createKey({ owner, metadata: { team: 'ops', env: 'prod' } });
      await t.createKey({ owner });
      const byTeam = await t.api.admin('get', `/admin/keys?owner=${encodeURIComponent(owner)}&metadata=team:design`);
      expect(byTeam.status).toBe(200);
      expect(byTeam.body.data.map((k: { id: string }) => k.id)).toEqual([design.id]);
      const byEnv = await t.api.admin('get', `/admin/keys?owner=${encodeURIComponent(owner)}&metadata=${encodeURIComponent('env:prod')}`);
      expect(byEnv.body.data).toHaveLength(2);
      const none = await t.api.admin('get', `/admin/keys?owner=${encodeURIComponent(owner)}&metadata=team:`);
      expect(none.body.data).toHaveLength(0);
      const bad = await t.api.admin('get', '/admin/keys?metadata=no-colon');
      expect(bad.status).toBe(400);
      expect(bad.body.error).toMatchObject({ code: 'invalid_request', param: 'metadata' });
    });
  });

  describe('allowed_models', () => {
    it('403 model_not_allowed for another model, not charged; the listed model works', async () => {
      const { id, key } = await t.createKey({ allowed_providers: ['local', 'jimeng'], allowed_models: ['jimeng-4.5'] });
      const refused = await t.api.client(key, localRequest());
      expect(refused.status).toBe(403);
      expect(refused.body.error).toMatchObject({ code: 'model_not_allowed', param: 'model', type: 'permission_error' });
      expect(await used(id)).toBe(0);
      expect((await t.api.client(key, { prompt: 'ok', model: 'jimeng-4.5' })).status).toBe(200);
    });

    it('comes after model known and before provider allowed in the order of checks', async () => {
      const { key } = await t.createKey({ allowed_providers: ['local'], allowed_models: ['local-1'] });
      expect((await t.api.client(key, localRequest({ model: 'nope-1' }))).body.error.code).toBe('model_not_found');
      expect((await t.api.client(key, { prompt: 'x', model: 'jimeng-4.5' })).body.error.code).toBe('model_not_allowed');
    });
  });

  describe('allowed_ips (no TRUSTED_PROXIES: the socket address counts)', () => {
    it('403 ip_not_allowed outside the list, not charged; inside it works (IPv4 and IPv6 lists)', async () => {
      const outside = await t.createKey({ allowed_ips: ['10.0.0.0/8', '2001:db8::/32'] });
      const refused = await t.api.client(outside.key, localRequest());
      expect(refused.status).toBe(403);
      expect(refused.body.error).toMatchObject({ code: 'ip_not_allowed', type: 'permission_error' });
      expect(refused.body.error.message).toContain('127.0.0.1');
      expect(await used(outside.id)).toBe(0);
      const inside = await t.createKey({ allowed_ips: ['10.0.0.0/8', '127.0.0.0/8'] });
      expect((await t.api.client(inside.key, localRequest())).status).toBe(200);
      const v6 = await t.createKey({ allowed_ips: ['::1', '127.0.0.1/32'] });
      expect((await t.api.client(v6.key, localRequest())).status).toBe(200);
    });

    it('ignores X-Forwarded-For from a peer that is not a trusted proxy', async () => {
      const { key } = await t.createKey({ allowed_ips: ['203.0.113.5'] });
      const res = await t.api.send('post', '/images/generate', {
        body: localRequest(),
        headers: { Authorization: `Bearer ${key}`, 'X-Forwarded-For': '203.0.113.5' },
      });
      expect(res.status).toBe(403);
      expect(res.body.error.code).toBe('ip_not_allowed');
    });

    it('is checked right after the key, before the body: also on GET /v1/models', async () => {
      const { key } = await t.createKey({ allowed_ips: ['10.0.0.0/8'] });
      expect((await t.api.client(key, { prompt: '' })).body.error.code).toBe('ip_not_allowed');
      const models = await t.api.send('get', '/v1/models', { headers: { Authorization: `Bearer ${key}` } });
      expect(models.status).toBe(403);
      expect(models.body.error.code).toBe('ip_not_allowed');
    });
  });

  describe('max_concurrent', () => {
    it('over the cap: 429 concurrency_limited with Retry-After, not charged; a slot frees when a generation ends', async () => {
      const { id, key } = await t.createKey({ allowed_providers: ['jimeng'], max_concurrent: 2, credits_quota: 100 });
      const body = { prompt: `held ${id} [hold]`, model: 'jimeng-4.5' };
      const running = [t.api.client(key, body), t.api.client(key, body)];
      await until(() => ark.requests.filter((r) => r.prompt === body.prompt).length === 2, 'two held generations');
      const refused = await t.api.client(key, body);
      expect(refused.status).toBe(429);
      expect(refused.body.error).toMatchObject({ code: 'concurrency_limited', type: 'rate_limit_error' });
      expect(refused.headers['retry-after']).toBe('1');
      expect(await used(id)).toBe(8);
      ark.releaseHeld();
      expect((await Promise.all(running)).map((r) => r.status)).toEqual([200, 200]);
      expect((await t.api.client(key, { prompt: 'after', model: 'jimeng-4.5' })).status).toBe(200);
      expect(await used(id)).toBe(12);
    });

    it('a failed generation gives its slot back', async () => {
      const { key } = await t.createKey({ allowed_providers: ['jimeng'], max_concurrent: 1 });
      expect((await t.api.client(key, { prompt: 'boom [error:InternalServiceError:500]', model: 'jimeng-4.5' })).status).toBeGreaterThanOrEqual(500);
      expect((await t.api.client(key, { prompt: 'fine', model: 'jimeng-4.5' })).status).toBe(200);
    });
  });

  describe('GET /v1/models (listModelsOpenAI, getModelOpenAI) with the official openai SDK', () => {
    const sdk = (key: string) => openaiClient(t, key);

    it('models.list() lists what this key may use', async () => {
      const local = await t.createKey({ allowed_providers: ['local'] });
      expect((await sdk(local.key).models.list()).data.map((m) => m.id)).toEqual(['local-1']);
      const jimeng = await t.createKey({ allowed_providers: ['local', 'jimeng'], allowed_models: ['jimeng-4.5', 'jimeng-3.1'] });
      const listed = (await sdk(jimeng.key).models.list()).data;
      expect(listed.map((m) => m.id).sort()).toEqual(['jimeng-3.1', 'jimeng-4.5']);
      expect(listed[0]).toMatchObject({ object: 'model', owned_by: 'jimeng' });
    });

    it('models.retrieve(): the model, 403 model_not_allowed, 404 model_not_found, 401 without a key', async () => {
      const { key } = await t.createKey({ allowed_providers: ['local'] });
      expect(await sdk(key).models.retrieve('local-1')).toMatchObject({ id: 'local-1', object: 'model', owned_by: 'local' });
      await expect(sdk(key).models.retrieve('jimeng-4.5')).rejects.toMatchObject({ status: 403, code: 'model_not_allowed' });
      await expect(sdk(key).models.retrieve('dall-e-9')).rejects.toMatchObject({ status: 404, code: 'model_not_found' });
      await expect(sdk('hyai_wrong').models.list()).rejects.toMatchObject({ status: 401, code: 'invalid_api_key' });
      // Through the spec-checking client too.
      expect((await t.api.send('get', '/v1/models/jimeng-4.5', { headers: { Authorization: `Bearer ${key}` } })).status).toBe(403);
      expect((await t.api.send('get', '/v1/models')).status).toBe(401);
    });

    it('each model publishes the input images it takes (input_limits), absent for a model that takes none', async () => {
      const { key } = await t.createKey({ allowed_providers: ['local', 'jimeng'] });
      const get = async (model: string) => (await t.api.send('get', `/v1/models/${model}`, { headers: { Authorization: `Bearer ${key}` } })).body;
      expect((await get('local-1')).input_limits).toEqual({
        max_images: 4,
        formats: ['png', 'jpeg', 'webp', 'gif', 'bmp', 'tiff'],
        max_bytes: 10_000_000,
        // The gateway's own bound on every input, where the model states none.
        max_pixels: 36_000_000,
        mask: true,
        delivery: 'inline',
      });
      // Jimeng 4.0 on the visual API fetches its inputs from the gateway's URLs.
      expect((await get('jimeng-4.0')).input_limits).toMatchObject({
        max_images: 10,
        formats: ['jpeg', 'png'],
        max_bytes: 15_000_000,
        max_side: 4096,
        mask: false,
        delivery: 'url',
      });
      expect(await get('jimeng-3.1')).not.toHaveProperty('input_limits');
      const listed = (await t.api.send('get', '/v1/models', { headers: { Authorization: `Bearer ${key}` } })).body.data as Array<{
        id: string;
        input_limits?: { max_images: number };
      }>;
      expect(Object.fromEntries(listed.map((m) => [m.id, m.input_limits?.max_images ?? null]))).toEqual({
        'local-1': 4,
        'jimeng-4.5': 14,
        'jimeng-5.0-lite': 14,
        'jimeng-4.0': 10,
        'jimeng-3.1': null,
      });
    });
  });
});

describe('allowed_ips behind trusted proxies (TRUSTED_PROXIES)', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ TRUSTED_PROXIES: '127.0.0.1/32, 10.0.0.0/8' });
  });
  afterAll(() => t.close());

  const fromHops = (key: string, forwardedFor: string) =>
    t.api.send('post', '/images/generate', { body: localRequest(), headers: { Authorization: `Bearer ${key}`, 'X-Forwarded-For': forwardedFor } });

  it('uses the hop just before the first untrusted proxy, never a spoofed hop further left', async () => {
    const { key } = await t.createKey({ allowed_ips: ['203.0.113.0/24'] });
    expect((await fromHops(key, '203.0.113.5')).status).toBe(200);
    expect((await fromHops(key, '203.0.113.5, 10.1.2.3')).status).toBe(200);
    // The client (198.51.100.1) put a fake allowed address on the left: not believed.
    const spoofed = await fromHops(key, '203.0.113.5, 198.51.100.1');
    expect(spoofed.status).toBe(403);
    expect(spoofed.body.error.message).toContain('198.51.100.1');
    // No header: the trusted proxy itself is the client.
    expect((await t.api.client(key, localRequest())).status).toBe(403);
  });

  it('refuses hops that are not bare addresses instead of keeping the proxy as the client (issue #29 §5)', async () => {
    const { key } = await t.createKey({ allowed_ips: ['127.0.0.0/8'] });
    expect((await fromHops(key, '127.0.0.5')).status).toBe(200);
    for (const hop of ['198.51.100.7:443', '[2001:db8::7]:443', '[2001:db8::7]', 'unknown', '198.51.100.7 , _', '_', '198.51.100.7%0a']) {
      const res = await fromHops(key, hop);
      expect({ hop, status: res.status, code: res.body.error?.code }).toEqual({ hop, status: 403, code: 'ip_not_allowed' });
    }
    // Ports and brackets are read as proxies write them: an allowed address behind them still works.
    expect((await fromHops(key, '127.0.0.5:443')).status).toBe(200);
    const v6 = await t.createKey({ allowed_ips: ['2001:db8::/32'] });
    expect((await fromHops(v6.key, '[2001:db8::7]:443')).status).toBe(200);
  });
});
