import { type TestGateway, SERVICE_TOKEN, localRequest, startTestGateway } from '../helpers/test-gateway';

describe('internal creative API', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  const protectedRoutes: Array<['get' | 'post', string, unknown]> = [
    ['get', '/api/v1/creative/models', undefined],
    ['get', '/api/v1/creative/providers', undefined],
    ['get', '/api/v1/creative/channels/health', undefined],
    ['post', '/api/v1/creative/images/generations', localRequest()],
    ['get', '/api/v1/creative/generations', undefined],
    ['get', '/api/v1/creative/generations/gen_x', undefined],
    ['get', `/api/v1/creative/usage?from=${encodeURIComponent('2026-01-01T00:00:00Z')}&to=${encodeURIComponent('2027-01-01T00:00:00Z')}`, undefined],
    ['get', '/api/v1/creative/openapi.json', undefined],
    ['get', '/docs', undefined],
  ];

  describe('service-token auth on every route', () => {
    it.each(protectedRoutes)('%s %s: 401 without the headers, 403 with a wrong pair or a client key', async (method, path, body) => {
      const { key } = await t.createKey();
      const missing = await t.internal.send(method, path, { body });
      expect(missing.status).toBe(401);
      expect(missing.body.error.code).toBe('missing_service_token');
      for (const headers of [
        { ...SERVICE_TOKEN, 'CF-Access-Client-Secret': 'wrong-secret-wrong-secret' },
        { ...SERVICE_TOKEN, 'CF-Access-Client-Id': 'someone-else.access' },
        { 'CF-Access-Client-Id': 'x', 'CF-Access-Client-Secret': key },
      ]) {
        const wrong = await t.internal.send(method, path, { body, headers });
        expect(wrong.status).toBe(403);
        expect(wrong.body.error).toMatchObject({ code: 'invalid_service_token', type: 'permission_error' });
      }
      const clientKey = await t.internal.send(method, path, { body, headers: { Authorization: `Bearer ${key}` } });
      expect(clientKey.status).toBe(401);
    });

    it('accepts any of several configured pairs', async () => {
      const other = await startTestGateway({ CF_ACCESS_CLIENT_ID: 'a.access,b.access', CF_ACCESS_CLIENT_SECRET: 'secret-a-0123456789,secret-b-0123456789' });
      try {
        for (const [id, secret] of [
          ['a.access', 'secret-a-0123456789'],
          ['b.access', 'secret-b-0123456789'],
        ]) {
          const res = await other.internal.send('get', '/api/v1/creative/models', {
            headers: { 'CF-Access-Client-Id': id!, 'CF-Access-Client-Secret': secret! },
          });
          expect(res.status).toBe(200);
        }
        const crossed = await other.internal.send('get', '/api/v1/creative/models', {
          headers: { 'CF-Access-Client-Id': 'a.access', 'CF-Access-Client-Secret': 'secret-b-0123456789' },
        });
        expect(crossed.status).toBe(403);
      } finally {
        await other.close();
      }
    });
  });

  it('GET /api/v1/creative/models (listModels) shows price and availability', async () => {
    const res = await t.internal.service('get', '/api/v1/creative/models');
    expect(res.status).toBe(200);
    const byModel = Object.fromEntries(res.body.data.map((m: { model: string }) => [m.model, m]));
    expect(byModel['local-1']).toMatchObject({ provider: 'local', credits_per_image: 1, status: 'available' });
    expect(byModel['jimeng-4.5']).toMatchObject({
      provider: 'jimeng',
      transport: 'ark',
      status: 'unconfigured',
      size_bounds: { min_pixels: 3_686_400, max_pixels: 16_777_216, min_ratio: 1 / 16, max_ratio: 16 },
    });
    // The input images each takes, as on GET /v1/models/{model}; none for Jimeng 3.1.
    expect(byModel['jimeng-4.5'].input_limits).toMatchObject({ max_images: 14, delivery: 'inline', mask: false });
    expect(byModel['local-1'].input_limits).toMatchObject({ max_images: 4, mask: true });
    expect(byModel['jimeng-3.1']).not.toHaveProperty('input_limits');
  });

  it('GET /api/v1/creative/providers (listProviders) reports circuit, error rate and latency', async () => {
    await t.internal.service('post', '/api/v1/creative/images/generations', localRequest());
    const res = await t.internal.service('get', '/api/v1/creative/providers');
    expect(res.status).toBe(200);
    const local = res.body.data.find((p: { name: string }) => p.name === 'local');
    expect(local).toMatchObject({ configured: true, circuit: 'closed', in_flight: 0, error_rate: 0 });
    expect(local.calls).toBeGreaterThan(0);
    expect(local.latency_ms.p50).toBeGreaterThanOrEqual(0);
    expect(res.body.data.find((p: { name: string }) => p.name === 'jimeng')).toMatchObject({ configured: false });
  });

  describe('POST /api/v1/creative/images/generations (createGeneration)', () => {
    it('generates without a key or quota, attributed to the service', async () => {
      const res = await t.internal.service('post', '/api/v1/creative/images/generations', localRequest({ n: 2 }));
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ model: 'local-1', provider: 'local', usage: { images: 2, credits: 2 } });
      const record = await t.internal.service('get', `/api/v1/creative/generations/${res.body.id}`);
      expect(record.body).toMatchObject({ key_id: null, client_id: SERVICE_TOKEN['CF-Access-Client-Id'], status: 'succeeded', images: 2 });
    });

    it('with provider, sends an uncatalogued model to that provider as its upstream id', async () => {
      const res = await t.internal.service('post', '/api/v1/creative/images/generations', localRequest({ model: 'local-experimental', provider: 'local' }));
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ model: 'local-experimental', provider: 'local', usage: { credits: 0 } });
    });

    it('400 for a provider that does not serve the model or does not exist; 404 for an unknown model; 503 unconfigured', async () => {
      const mismatch = await t.internal.service('post', '/api/v1/creative/images/generations', localRequest({ provider: 'jimeng' }));
      expect(mismatch.status).toBe(400);
      expect(mismatch.body.error.param).toBe('provider');
      const unknownProvider = await t.internal.service('post', '/api/v1/creative/images/generations', localRequest({ provider: 'nope' }));
      expect(unknownProvider.status).toBe(400);
      const unknownModel = await t.internal.service('post', '/api/v1/creative/images/generations', localRequest({ model: 'nope' }));
      expect(unknownModel.status).toBe(404);
      expect(unknownModel.body.error.code).toBe('model_not_found');
      const unconfigured = await t.internal.service('post', '/api/v1/creative/images/generations', { prompt: 'x', model: 'jimeng-4.5' });
      expect(unconfigured.status).toBe(503);
      const invalid = await t.internal.service('post', '/api/v1/creative/images/generations', { model: 'local-1' });
      expect(invalid.status).toBe(400);
      expect(invalid.body.error.param).toBe('prompt');
    });
  });

  describe('GET /api/v1/creative/generations (listGenerations) and /{id} (getGeneration)', () => {
    it('pages newest first and filters by key, model, status and time', async () => {
      const { id: keyId, key } = await t.createKey({ credits_quota: 100 });
      const since = new Date(t.clock.now()).toISOString();
      const ids: string[] = [];
      for (let i = 0; i < 3; i += 1) {
        ids.push((await t.api.client(key, localRequest())).body.id);
        t.clock.advanceMs(5);
      }
      await t.api.client(key, localRequest({ model: 'jimeng-4.5' })); // 403: no generation row
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const page: { body: { data: Array<{ id: string; key_id: string }>; next_cursor: string | null } } = await t.internal.service(
          'get',
          `/api/v1/creative/generations?key_id=${keyId}&limit=2${cursor ? `&cursor=${cursor}` : ''}`,
        );
        seen.push(...page.body.data.map((g) => g.id));
        cursor = page.body.next_cursor;
      } while (cursor);
      expect(seen).toEqual([...ids].reverse());
      const filtered = await t.internal.service(
        'get',
        `/api/v1/creative/generations?key_id=${keyId}&model=local-1&status=succeeded&created_after=${encodeURIComponent(since)}`,
      );
      expect(filtered.body.data).toHaveLength(3);
      const none = await t.internal.service('get', `/api/v1/creative/generations?key_id=${keyId}&status=failed`);
      expect(none.body.data).toEqual([]);
      const before = await t.internal.service('get', `/api/v1/creative/generations?key_id=${keyId}&created_before=${encodeURIComponent(since)}`);
      expect(before.body.data).toEqual([]);
    });

    it('400 for bad filters, 404 generation_not_found', async () => {
      for (const query of ['status=weird', 'limit=0', 'created_after=yesterday', 'cursor=zzz', 'key_id=nope']) {
        expect((await t.internal.service('get', `/api/v1/creative/generations?${query}`)).status).toBe(400);
      }
      const missing = await t.internal.service('get', '/api/v1/creative/generations/gen_missing');
      expect(missing.status).toBe(404);
      expect(missing.body.error).toMatchObject({ code: 'generation_not_found', param: 'id' });
    });
  });

  describe('GET /api/v1/creative/usage (getUsage)', () => {
    it('sums succeeded generations by day, key and model over [from, to)', async () => {
      const { id: keyId, key } = await t.createKey({ credits_quota: 100 });
      await t.api.client(key, localRequest({ n: 2 }));
      await t.api.client(key, localRequest());
      await t.api.client(key, localRequest({ size: '9999x9999' })); // refused: not counted
      const day = new Date(t.clock.now()).toISOString().slice(0, 10);
      const from = `${day}T00:00:00.000Z`;
      const to = new Date(Date.parse(from) + 86_400_000).toISOString();
      const range = (a: string, b: string) => `/api/v1/creative/usage?from=${encodeURIComponent(a)}&to=${encodeURIComponent(b)}&key_id=${keyId}`;
      const res = await t.internal.service('get', range(from, to));
      expect(res.status).toBe(200);
      expect(res.body.data).toEqual([{ day, key_id: keyId, client_id: null, model: 'local-1', generations: 2, images: 3, credits: 3 }]);
      const empty = await t.internal.service('get', range(to, new Date(Date.parse(to) + 1000).toISOString()));
      expect(empty.body.data).toEqual([]);
    });

    it('400 when from or to is missing or the range is empty', async () => {
      const at = (iso: string) => encodeURIComponent(iso);
      expect((await t.internal.service('get', `/api/v1/creative/usage?from=${at('2026-01-01T00:00:00Z')}`)).status).toBe(400);
      const reversed = await t.internal.service('get', `/api/v1/creative/usage?from=${at('2026-02-01T00:00:00Z')}&to=${at('2026-01-01T00:00:00Z')}`);
      expect(reversed.status).toBe(400);
      expect(reversed.body.error.param).toBe('to');
    });
  });

  it('GET /api/v1/creative/openapi.json (getCreativeOpenApiDocument) and /docs (getCreativeApiReference), offline', async () => {
    const spec = await t.internal.service('get', '/api/v1/creative/openapi.json');
    expect(spec.body.info.title).toBe('Creative Gateway internal API');
    const docs = await t.internal.service('get', '/docs');
    expect(docs.status).toBe(200);
    expect(docs.text).toMatch(/<script src="\/docs\/scalar\.js\?v=[0-9a-f]{16}">/);
    expect(docs.text).toContain('"withDefaultFonts": false');
    expect(docs.text).toContain('Creative Gateway internal API');
  });
});

describe('operations endpoints on both listeners', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  it('GET /healthz and /readyz (getLiveness, getReadiness, getInternalLiveness, getInternalReadiness)', async () => {
    for (const client of [t.api, t.internal]) {
      expect((await client.send('get', '/healthz')).body).toEqual({ status: 'ok' });
      expect((await client.send('get', '/readyz')).body).toEqual({ status: 'ok' });
    }
  });

  it('GET /metrics (getMetrics) counts requests by route, generation latency, credits and refusals', async () => {
    const { key } = await t.createKey({ rate_limit_rpm: 1 });
    await t.api.client(key, localRequest({ n: 2 }));
    await t.api.client(key, localRequest());
    const res = await t.internal.send('get', '/metrics');
    expect(res.status).toBe(200);
    expect(res.text).toMatch(/creative_gateway_http_requests_total\{listener="public",method="POST",route="\/images\/generate",status="200"\} 1/);
    expect(res.text).toMatch(/creative_gateway_http_requests_total\{listener="public",method="POST",route="\/images\/generate",status="429"\} 1/);
    expect(res.text).toMatch(/creative_gateway_generation_seconds_count\{provider="local",outcome="succeeded"\} 1/);
    expect(res.text).toMatch(/creative_gateway_credits_charged_total\{model="local-1"\} 2/);
    expect(res.text).toMatch(/creative_gateway_rate_limit_refusals_total 1/);
  });

  it('/readyz answers 503 not_ready when the database is gone', async () => {
    const doomed = await startTestGateway();
    await doomed.gateway.database.close();
    try {
      const res = await doomed.api.send('get', '/readyz');
      expect(res.status).toBe(503);
      expect(res.body.error.code).toBe('not_ready');
    } finally {
      await doomed.close().catch(() => undefined);
    }
  });
});
