import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
import { type FakeVisual, startFakeVisual } from '../fakes/fake-volc-visual';
import { bearer, createAdminTokenVia } from '../helpers/admin-tokens';
import { addChannel as createChannel, closedPort } from '../helpers/channels';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';

const ARK_KEYS = ['ark-key-account-a-0001', 'ark-key-account-b-0002', 'ark-key-account-c-0003'];
const VISUAL_ACCOUNTS = [
  { accessKeyId: 'AKvisualAccountA', secretAccessKey: 'visual-secret-account-a-0001' },
  { accessKeyId: 'AKvisualAccountB', secretAccessKey: 'visual-secret-account-b-0002' },
];
const SECRETS = [...ARK_KEYS, ...VISUAL_ACCOUNTS.map((a) => a.secretAccessKey)];

describe('channels: upstream accounts', () => {
  let ark: FakeImagesApi[];
  let visual: FakeVisual[];
  let t: TestGateway;
  let key: string;
  let keyId: string;
  const created: string[] = [];

  beforeAll(async () => {
    ark = await Promise.all(ARK_KEYS.map((apiKey) => startFakeImagesApi({ apiKey, flavour: 'ark' })));
    visual = await Promise.all(VISUAL_ACCOUNTS.map((account) => startFakeVisual(account)));
    t = await startTestGateway({ VOLC_POLL_INTERVAL_MS: '5', CHANNEL_QUEUE_TIMEOUT_MS: '300', PROVIDER_JIMENG_RETRY_BASE_DELAY_MS: '5' });
    ({ key, id: keyId } = await t.createKey({ allowed_providers: ['jimeng', 'local'], credits_quota: 1_000_000 }));
  });
  afterAll(async () => {
    await t.close();
    await Promise.all([...ark, ...visual].map((fake) => fake.close()));
  });
  /** Each routing test starts from no API channels and healthy accounts. */
  afterEach(async () => {
    for (const id of created.splice(0)) await t.api.admin('delete', `/admin/channels/${id}`);
    for (const fake of ark) {
      fake.setMode('normal');
      fake.setApiKey(ARK_KEYS[ark.indexOf(fake)]!);
    }
  });

  const addChannel = (body: Record<string, unknown>) => createChannel(t.api, body, created);
  const arkChannel = (index: number, extra: Record<string, unknown> = {}) =>
    addChannel({
      name: `ark ${index}`,
      provider: 'jimeng',
      transport: 'ark',
      base_url: ark[index]!.url,
      models: [{ model: 'jimeng-4.5' }],
      credentials: { api_key: ARK_KEYS[index] },
      ...extra,
    });
  const visualChannel = (index: number, extra: Record<string, unknown> = {}) =>
    addChannel({
      name: `visual ${index}`,
      provider: 'jimeng',
      transport: 'visual',
      base_url: visual[index]!.url,
      models: [{ model: 'jimeng-4.0' }],
      credentials: { access_key_id: VISUAL_ACCOUNTS[index]!.accessKeyId, secret_access_key: VISUAL_ACCOUNTS[index]!.secretAccessKey },
      ...extra,
    });
  const generate = (prompt: string, model = 'jimeng-4.5', extra: Record<string, unknown> = {}) =>
    t.api.client(key, { prompt, model, size: '2048x2048', ...extra });
  const arkCalls = () => ark.map((fake) => fake.counters.calls);
  const since = (before: number[]) => arkCalls().map((n, i) => n - before[i]!);
  const creditsUsed = () => t.api.creditsUsed(keyId);

  describe('the admin resource', () => {
    it('createChannel: 201 with Location and a hint; credentials never returned, logged or stored in clear', async () => {
      const res = await t.api.admin('post', '/admin/channels', {
        name: 'ark a',
        provider: 'jimeng',
        transport: 'ark',
        base_url: ark[0]!.url,
        models: [{ model: 'jimeng-4.5', upstream_model: 'doubao-seedream-4-5-custom' }],
        priority: 5,
        weight: 2,
        max_concurrency: 4,
        rpm: 100,
        ipm: 200,
        timeout_ms: 5000,
        credentials: { api_key: ARK_KEYS[0] },
      });
      expect(res.status).toBe(201);
      created.push(res.body.id);
      expect(res.headers.location).toBe(`/admin/channels/${res.body.id}`);
      expect(res.body).toMatchObject({
        id: expect.stringMatching(/^chn_[0-9A-Za-z]{22}$/),
        provider: 'jimeng',
        transport: 'ark',
        models: [{ model: 'jimeng-4.5', upstream_model: 'doubao-seedream-4-5-custom' }],
        priority: 5,
        weight: 2,
        status: 'enabled',
        disabled_reason: null,
        max_concurrency: 4,
        rpm: 100,
        ipm: 200,
        timeout_ms: 5000,
        credentials_hint: 'ark-...0001',
        source: 'api',
      });
      // The upstream override is what the account receives.
      expect((await generate('override')).status).toBe(200);
      expect(ark[0]!.requests.at(-1)?.model).toBe('doubao-seedream-4-5-custom');

      const visualRes = await visualChannel(0);
      const row = await t.gateway.database.db.selectFrom('channels').selectAll().where('id', 'in', [res.body.id, visualRes.id]).execute();
      expect(row).toHaveLength(2);
      for (const secret of SECRETS) {
        expect(JSON.stringify(row)).not.toContain(secret);
        expect(t.logs.join('\n')).not.toContain(secret);
      }
      expect(row[0]!.credentials_sealed).toMatch(/^v1\.[0-9a-f]{8}\./);
      const listed = await t.api.admin('get', '/admin/channels');
      const got = await t.api.admin('get', `/admin/channels/${res.body.id}`);
      for (const secret of SECRETS) expect(JSON.stringify([res.body, visualRes, listed.body, got.body])).not.toContain(secret);
    });

    it('listChannels shows the environment channels, read-only (409 channel_read_only)', async () => {
      const res = await t.api.admin('get', '/admin/channels?provider=local');
      expect(res.status).toBe(200);
      expect(res.body.data).toEqual([expect.objectContaining({ id: 'chn_envLocal', source: 'environment', transport: 'local', status: 'enabled' })]);
      expect((await t.api.admin('get', '/admin/channels/chn_envLocal')).body.source).toBe('environment');
      for (const res2 of [
        await t.api.admin('patch', '/admin/channels/chn_envLocal', { weight: 2 }),
        await t.api.admin('delete', '/admin/channels/chn_envLocal'),
      ]) {
        expect(res2.status).toBe(409);
        expect(res2.body.error.code).toBe('channel_read_only');
      }
    });

    it('getChannel, updateChannel and deleteChannel; 404 channel_not_found after', async () => {
      const channel = await arkChannel(0);
      const updated = await t.api.admin('patch', `/admin/channels/${channel.id}`, { weight: 7, rpm: null, credentials: { api_key: ARK_KEYS[1] } });
      expect(updated.status).toBe(200);
      expect(updated.body).toMatchObject({ weight: 7, rpm: null, credentials_hint: 'ark-...0002' });
      expect((await t.api.admin('get', `/admin/channels/${channel.id}`)).body.weight).toBe(7);
      expect((await t.api.admin('delete', `/admin/channels/${channel.id}`)).status).toBe(204);
      for (const res of [
        await t.api.admin('get', `/admin/channels/${channel.id}`),
        await t.api.admin('patch', `/admin/channels/${channel.id}`, { weight: 1 }),
        await t.api.admin('delete', `/admin/channels/${channel.id}`),
        await t.api.admin('post', `/admin/channels/${channel.id}/test`),
      ]) {
        expect(res.status).toBe(404);
        expect(res.body.error.code).toBe('channel_not_found');
      }
    });

    it.each([
      [{ models: [{ model: 'no-such-model' }] }, 'models'],
      [{ models: [{ model: 'jimeng-4.0' }] }, 'models'],
      [{ models: [{ model: 'local-1' }] }, 'models'],
      [{ credentials: { access_key_id: 'AK', secret_access_key: 'x' } }, 'credentials'],
      [{ weight: 0 }, 'weight'],
      [{ transport: 'images-api', provider: 'jimeng', base_url: undefined }, 'models'],
    ])('400 invalid_request for %j', async (change, param) => {
      const res = await t.api.admin('post', '/admin/channels', {
        name: 'bad',
        provider: 'jimeng',
        transport: 'ark',
        models: [{ model: 'jimeng-4.5' }],
        credentials: { api_key: 'k' },
        ...change,
      });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('invalid_request');
      expect(res.body.error.param).toBe(param);
    });

    it('every mutation and test is in the audit log, without the credentials', async () => {
      const channel = await visualChannel(0);
      const renamed = await t.api.admin('patch', `/admin/channels/${channel.id}`, { name: 'visual renamed', weight: 4 });
      expect(renamed.status).toBe(200);
      const rekeyed = await t.api.admin('patch', `/admin/channels/${channel.id}`, {
        credentials: { access_key_id: VISUAL_ACCOUNTS[1]!.accessKeyId, secret_access_key: VISUAL_ACCOUNTS[1]!.secretAccessKey },
      });
      expect(rekeyed.status).toBe(200);
      expect((await t.api.admin('patch', `/admin/channels/${channel.id}`, { weight: 4 })).status).toBe(200);
      expect((await t.api.admin('post', `/admin/channels/${channel.id}/test`)).body.outcome).toBe('failed');
      expect((await t.api.admin('delete', `/admin/channels/${channel.id}`)).status).toBe(204);
      created.splice(created.indexOf(channel.id), 1);

      const listed = await t.api.admin('get', `/admin/audit-events?target=${channel.id}`);
      expect(listed.status).toBe(200);
      const events = [...listed.body.data].reverse() as Array<Record<string, unknown>>;
      // The update that changed nothing left no event.
      expect(events.map((e) => e.action)).toEqual(['channel.created', 'channel.updated', 'channel.updated', 'channel.tested', 'channel.deleted']);
      expect(events.every((e) => e.actor === 'root' && e.target === channel.id)).toBe(true);
      expect(events[0]).toMatchObject({ before: null, after: { name: 'visual 0', transport: 'visual', credentials_hint: expect.any(String) } });
      expect(events[1]).toMatchObject({ before: { name: 'visual 0', weight: 1 }, after: { name: 'visual renamed', weight: 4 } });
      expect(events[2]).toMatchObject({ before: { credentials: '[redacted]' }, after: { credentials: '[redacted]', credentials_hint: expect.any(String) } });
      // The account's key pair does not sign as the fake expects after the swap: an account error.
      expect(events[3]).toMatchObject({ before: { status: 'enabled' }, after: { status: 'auto_disabled', outcome: 'failed', model: 'jimeng-4.0' } });
      expect(events[4]).toMatchObject({ before: { name: 'visual renamed' }, after: null });

      const rows = await t.gateway.database.db.selectFrom('audit_events').selectAll().execute();
      const stored = JSON.stringify(rows);
      for (const secret of [...SECRETS, ...VISUAL_ACCOUNTS.map((a) => a.accessKeyId)]) expect(stored).not.toContain(secret);
    });

    it('401 without the admin secret, and a client key is no admin secret', async () => {
      expect((await t.api.send('get', '/admin/channels')).status).toBe(401);
      const res = await t.api.send('post', '/admin/channels/chn_envLocal/test', { headers: { Authorization: `Bearer ${key}` } });
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('invalid_admin_secret');
    });
  });

  describe('routing', () => {
    it('weights 1:3 within a tier: account B gets 3/4 of 400 calls (±5 sd)', async () => {
      await arkChannel(0, { weight: 1 });
      await arkChannel(1, { weight: 3 });
      const before = arkCalls();
      for (let batch = 0; batch < 20; batch += 1) {
        const statuses = await Promise.all(Array.from({ length: 20 }, (_, i) => generate(`weights ${batch}-${i}`)));
        expect(new Set(statuses.map((r) => r.status))).toEqual(new Set([200]));
      }
      const [a, b] = since(before);
      expect(a! + b!).toBe(400);
      // B ~ Binomial(400, 0.75): mean 300, sd 8.66; outside [257, 343] has probability < 1e-6.
      expect(b).toBeGreaterThanOrEqual(257);
      expect(b).toBeLessThanOrEqual(343);
      // 400 generations: on PostgreSQL on a loaded 2-core machine they take over the 30 s default.
    }, 120_000);

    it('the highest priority tier takes everything; disabled and auto-disabled channels are never chosen', async () => {
      const high = await arkChannel(0, { priority: 10 });
      await arkChannel(1, { priority: 0, weight: 1000 });
      let before = arkCalls();
      for (let i = 0; i < 20; i += 1) expect((await generate(`tier ${i}`)).status).toBe(200);
      expect(since(before)).toEqual([20, 0, 0]);

      await t.api.admin('patch', `/admin/channels/${high.id}`, { status: 'disabled' });
      before = arkCalls();
      for (let i = 0; i < 20; i += 1) expect((await generate(`disabled ${i}`)).status).toBe(200);
      expect(since(before)).toEqual([0, 20, 0]);

      await t.gateway.database.db.updateTable('channels').set({ status: 'auto_disabled', disabled_reason: 'test' }).where('id', '=', high.id).execute();
      before = arkCalls();
      for (let i = 0; i < 20; i += 1) expect((await generate(`auto-disabled ${i}`)).status).toBe(200);
      expect(since(before)).toEqual([0, 20, 0]);
    });

    it.each([
      ['busy (429)', (fake: FakeImagesApi) => fake.setMode('busy')],
      ['a 5xx', (fake: FakeImagesApi) => fake.setMode('failing')],
    ])('fails over on %s to another account, charges once and records the attempts', async (_name, breakIt) => {
      const first = await arkChannel(0, { priority: 10 });
      const second = await arkChannel(1);
      breakIt(ark[0]!);
      const before = arkCalls();
      const credits = await creditsUsed();
      const res = await generate('fail over');
      expect(res.status).toBe(200);
      expect(since(before)).toEqual([1, 1, 0]);
      expect((await creditsUsed()) - credits).toBe(4);
      expect(res.text).not.toContain('chn_');
      const generation = await t.internal.service('get', `/api/v1/creative/generations/${res.body.id}`);
      expect(generation.body.attempts).toEqual([
        expect.objectContaining({ channel_id: first.id, outcome: 'failed_over', error_code: expect.stringMatching(/^provider_(busy|error)$/) }),
        expect.objectContaining({ channel_id: second.id, outcome: 'succeeded', error_code: null }),
      ]);
    });

    it('fails over when the account refuses connections', async () => {
      const port = await closedPort();
      await arkChannel(0, { priority: 10, base_url: `http://127.0.0.1:${port}` });
      await arkChannel(1);
      const before = arkCalls();
      const res = await generate('refused');
      expect(res.status).toBe(200);
      expect(since(before)).toEqual([0, 1, 0]);
    });

    it('never retries a call the account may have accepted: a visual task is polled on its account only', async () => {
      await visualChannel(0, { priority: 10 });
      await visualChannel(1);
      const submits = () => visual.map((fake) => fake.requests.filter((r) => r.action === 'CVSync2AsyncSubmitTask').length);
      const before = submits();
      const credits = await creditsUsed();
      const res = await generate('accepted then failed [post-code:50500]', 'jimeng-4.0');
      expect(res.status).toBe(502);
      expect(submits().map((n, i) => n - before[i]!)).toEqual([1, 0]);
      expect(await creditsUsed()).toBe(credits);
      // Busy at submit means nothing was accepted: both accounts are tried, each up to 3 times.
      const beforeBusy = submits();
      const busy = await generate('busy at submit [code:50430]', 'jimeng-4.0');
      expect(busy.status).toBe(503);
      expect(busy.body.error.code).toBe('provider_busy');
      expect(submits().map((n, i) => n - beforeBusy[i]!)).toEqual([3, 3]);
    });

    it('never retries an Ark call that timed out after it was sent', async () => {
      await arkChannel(0, { priority: 10, timeout_ms: 300 });
      await arkChannel(1);
      const before = arkCalls();
      const res = await generate('too slow [slow:1000]');
      expect(res.status).toBe(504);
      expect(res.body.error.code).toBe('provider_timeout');
      expect(since(before)).toEqual([1, 0, 0]);
    });

    it("Ark's spend cap (SetLimitExceeded, HTTP 429) is an account problem: the channel is auto-disabled at once, not retried as busy", async () => {
      const capped = await arkChannel(0, { priority: 10 });
      const before = arkCalls();
      const res = await generate('over the spend cap [error:SetLimitExceeded:429]');
      expect(res.status).not.toBe(200);
      expect(since(before)[0]).toBe(1);
      const record = (await t.api.admin('get', `/admin/channels/${capped.id}`)).body;
      // The fake answers the code the prompt names, so the prompt's own words in the reason are redacted (its HTTP status stays).
      expect(record).toMatchObject({ status: 'auto_disabled', disabled_reason: expect.stringContaining('HTTP 429') });
      expect(record.disabled_reason).not.toContain('over the spend cap');
    });

    it.each(['AccountOverdueError:403', 'OperationDenied.ServiceOverdue:403', 'OperationDenied.ServiceNotOpen:403'])(
      "Ark's %s (arrears, a service not opened) is an account problem: the channel is auto-disabled at once, the call goes to another account",
      async (scenario) => {
        const overdue = await arkChannel(0, { priority: 10 });
        await arkChannel(1);
        const before = arkCalls();
        const res = await generate(`account refused [error:${scenario}]`);
        // The other account answers the same prompt with the same refusal: the request fails, each account asked once.
        expect(res.status).not.toBe(200);
        expect(since(before)).toEqual([1, 1, 0]);
        const record = (await t.api.admin('get', `/admin/channels/${overdue.id}`)).body;
        expect(record).toMatchObject({ status: 'auto_disabled', disabled_reason: expect.stringContaining('HTTP 403') });
      },
    );

    it('revoked credentials auto-disable the channel at once; a passing testChannel re-enables it', async () => {
      const revoked = await arkChannel(0, { priority: 10 });
      await arkChannel(1);
      ark[0]!.setApiKey('rotated-by-the-provider');
      const res = await generate('after revocation');
      expect(res.status).toBe(200);
      const record = (await t.api.admin('get', `/admin/channels/${revoked.id}`)).body;
      expect(record).toMatchObject({ status: 'auto_disabled', disabled_reason: expect.stringContaining('401') });
      expect(record.disabled_at).not.toBeNull();
      const before = arkCalls();
      for (let i = 0; i < 5; i += 1) expect((await generate(`while disabled ${i}`)).status).toBe(200);
      expect(since(before)).toEqual([0, 5, 0]);

      const failing = await t.api.admin('post', `/admin/channels/${revoked.id}/test`);
      expect(failing.status).toBe(200);
      expect(failing.body).toMatchObject({ outcome: 'failed', error_code: 'provider_error', channel: { status: 'auto_disabled' } });
      ark[0]!.setApiKey(ARK_KEYS[0]!);
      const passing = await t.api.admin('post', `/admin/channels/${revoked.id}/test`, { model: 'jimeng-4.5' });
      expect(passing.body).toMatchObject({ outcome: 'ok', error_code: null, channel: { status: 'enabled', disabled_reason: null } });
      expect(passing.body.latency_ms).toBeGreaterThanOrEqual(0);
      const bad = await t.api.admin('post', `/admin/channels/${revoked.id}/test`, { model: 'local-1' });
      expect(bad.status).toBe(400);
    });

    it('every channel saturated: waits the queue time, then 503 provider_busy with Retry-After; listChannelHealth shows the load', async () => {
      const only = await arkChannel(0, { max_concurrency: 1 });
      const held = generate('hold the only slot [hold]');
      await until(() => ark[0]!.counters.inFlight >= 1, 'the held generation upstream');
      const health = await t.internal.service('get', '/api/v1/creative/channels/health');
      expect(health.status).toBe(200);
      expect(health.body.data).toContainEqual(
        expect.objectContaining({ id: only.id, in_flight: 1, max_concurrency: 1, calls_this_minute: 1, images_this_minute: 1 }),
      );
      const adminHealth = await t.api.admin('get', `/admin/channels/${only.id}/health`);
      expect(adminHealth.status).toBe(200);
      expect(adminHealth.body).toMatchObject({
        id: only.id,
        status: 'enabled',
        circuit: 'closed',
        in_flight: 1,
        max_concurrency: 1,
        calls_this_minute: 1,
        images_this_minute: 1,
        cooling_down_until: null,
      });
      const refused = await generate('no slot left');
      expect(refused.status).toBe(503);
      expect(refused.body.error.code).toBe('provider_busy');
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
      ark[0]!.releaseHeld();
      expect((await held).status).toBe(200);
      expect(ark[0]!.counters.peakInFlight).toBe(1);
      expect((await generate('slot free again')).status).toBe(200);
    });

    it('rpm and ipm hold: past them the channel is not chosen', async () => {
      await arkChannel(0, { priority: 10, rpm: 3 });
      await arkChannel(1, { priority: 5, ipm: 4 });
      await arkChannel(2);
      const before = arkCalls();
      for (let i = 0; i < 4; i += 1) expect((await generate(`limits ${i}`, 'jimeng-4.5', { n: 3 })).status).toBe(200);
      // 12 one-image calls: 3 on A (rpm), 4 on B (ipm), the rest on C.
      expect(since(before)).toEqual([3, 4, 5]);
    });
  });

  it('401 without a service token on channel health', async () => {
    expect((await t.internal.send('get', '/api/v1/creative/channels/health')).status).toBe(401);
  });

  it('getChannelHealth: an idle channel against its limits; 400 bad id, 404 unknown, 401, 403 without channels:read', async () => {
    const channel = await arkChannel(1, { max_concurrency: 4, rpm: 60, ipm: 90 });
    const idle = await t.api.admin('get', `/admin/channels/${channel.id}/health`);
    expect(idle.status).toBe(200);
    expect(idle.body).toEqual({
      id: channel.id,
      status: 'enabled',
      circuit: 'closed',
      in_flight: 0,
      max_concurrency: 4,
      calls_this_minute: 0,
      rpm: 60,
      images_this_minute: 0,
      ipm: 90,
      cooling_down_until: null,
      calls: 0,
      error_rate: 0,
      latency_ms: { p50: null, p95: null, p99: null },
    });
    expect((await t.api.admin('get', '/admin/channels/bad-id/health')).status).toBe(400);
    const missing = await t.api.admin('get', '/admin/channels/chn_missing/health');
    expect([missing.status, missing.body.error.code]).toEqual([404, 'channel_not_found']);
    expect((await t.api.send('get', `/admin/channels/${channel.id}/health`)).status).toBe(401);
    const keysReader = await createAdminTokenVia(t.api, ['keys:read']);
    const refused = await t.api.send('get', `/admin/channels/${channel.id}/health`, { headers: bearer(keysReader.token) });
    expect([refused.status, refused.body.error.code]).toEqual([403, 'insufficient_scope']);
    const reader = await createAdminTokenVia(t.api, ['channels:read']);
    expect((await t.api.send('get', `/admin/channels/${channel.id}/health`, { headers: bearer(reader.token) })).status).toBe(200);
  });
});

describe('channels: the saturation queue is bounded in waiters', () => {
  let fake: FakeImagesApi;
  let t: TestGateway;
  let key: string;

  beforeAll(async () => {
    fake = await startFakeImagesApi({ apiKey: ARK_KEYS[0]!, flavour: 'ark' });
    // A queue time far beyond the test's: a refusal can only come from the waiter bound.
    t = await startTestGateway({ CHANNEL_QUEUE_TIMEOUT_MS: '60000', CHANNEL_QUEUE_MAX_WAITERS: '2', PROVIDER_JIMENG_TIMEOUT_MS: '120000' });
    ({ key } = await t.createKey({ allowed_providers: ['jimeng'], credits_quota: 1000 }));
    const res = await t.api.admin('post', '/admin/channels', {
      name: 'one slot',
      provider: 'jimeng',
      transport: 'ark',
      base_url: fake.url,
      models: [{ model: 'jimeng-4.5' }],
      max_concurrency: 1,
      credentials: { api_key: ARK_KEYS[0] },
    });
    expect(res.status).toBe(201);
  });
  afterAll(async () => {
    fake.releaseHeld();
    await t.close();
    await fake.close();
  });

  const generate = (prompt: string) => t.api.client(key, { prompt, model: 'jimeng-4.5', size: '2048x2048' });
  const waiting = async () => {
    const metrics = (await t.internal.send('get', '/metrics')).text;
    return Number(/^creative_gateway_channel_queue_waiting\{model="jimeng-4\.5"\} (\d+)$/m.exec(metrics)?.[1] ?? 0);
  };

  it('past CHANNEL_QUEUE_MAX_WAITERS calls waiting for a model: 503 provider_busy with Retry-After at once; the waiters are served', async () => {
    const held = generate('hold the only slot [hold:slot]');
    await fake.whenHeld('slot');
    const waiters = [generate('waiter 1'), generate('waiter 2')];
    await until(async () => (await waiting()) === 2, 'two calls waiting for the slot');

    const refused = await generate('one too many');
    expect(refused.status).toBe(503);
    expect(refused.body.error).toMatchObject({ code: 'provider_busy', message: expect.stringContaining('queue is full') });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    // Answered while the slot was still held and both waiters still waited.
    expect(await waiting()).toBe(2);
    expect(fake.counters.calls).toBe(1);

    fake.releaseHeld('slot');
    expect((await held).status).toBe(200);
    expect((await Promise.all(waiters)).map((r) => r.status)).toEqual([200, 200]);
    expect(await waiting()).toBe(0);
    expect(fake.counters.peakInFlight).toBe(1);
  });
});
