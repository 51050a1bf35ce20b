import type { Response } from 'supertest';
import { type Seen, countIn as count, expectBooksBalance, expectOnlyServedOrDependency503, phasedTraffic } from '../helpers/outage-traffic';
import { type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';
import { ThrowawayRedis } from '../helpers/throwaway-servers';
import { until } from '../helpers/until';
import type { ChannelLimitStore } from '../../src/channels/channel-limits';
import { DependencyUnavailableError } from '../../src/errors/dependency-errors';
import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';

async function readiness(t: TestGateway): Promise<Response> {
  return t.api.send('get', '/readyz');
}

describe('Redis (the rate-limit store) fails while clients are sending', () => {
  let redis: ThrowawayRedis;
  let t: TestGateway;

  beforeEach(async () => {
    redis = await ThrowawayRedis.start();
  });
  /** Traffic before, while and after Redis is frozen (SIGSTOP); `whileFrozen` runs once the 503s come. */
  async function throughAFreeze({ traffic, setPhase }: ReturnType<typeof phasedTraffic>, whileFrozen = async () => {}): Promise<Seen[]> {
    await traffic.until((r) => count(r, 'before', 200) >= 10, 'traffic before the outage');
    redis.freeze();
    setPhase('frozen');
    await traffic.until((r) => count(r, 'frozen', 503) >= 8, '503s while Redis is frozen');
    await whileFrozen();
    setPhase('thawing');
    redis.thaw();
    setPhase('back');
    await traffic.until((r) => count(r, 'back', 200) >= 10, 'traffic after Redis thawed');
    return traffic.stop();
  }
  afterEach(async () => {
    redis.thaw();
    await t.close();
    await redis.kill();
  });

  it('killed and restarted: 503 dependency_unavailable at once, /readyz names redis, recovery without restart, books balance', async () => {
    t = await startTestGateway({ REDIS_URL: redis.url, READINESS_FAILURE_WINDOW_MS: '300' });
    const { id, key } = await t.createKey({ credits_quota: 100_000, rate_limit_rpm: 100_000 });
    const { traffic, setPhase } = phasedTraffic(t, key);
    await traffic.until((r) => count(r, 'before', 200) >= 10, 'traffic before the outage');

    await redis.kill();
    setPhase('down');
    // Refused while Redis is still down: nothing waits for the outage to end.
    await traffic.until((r) => count(r, 'down', 503) >= 20, '503s during the outage');
    const notReady = await readiness(t);
    expect([notReady.status, notReady.body.error.code, notReady.body.error.dependency]).toEqual([503, 'not_ready', 'redis']);
    expect((await t.internal.send('get', '/readyz')).body.error.dependency).toBe('redis');

    setPhase('restarting');
    await redis.start();
    setPhase('back');
    await traffic.until((r) => count(r, 'back', 200) >= 10, 'traffic after Redis returned');
    await until(async () => (await readiness(t)).status === 200, '/readyz 200 after Redis returned', 20_000);
    const results = await traffic.stop();

    // Nothing is served while Redis is down: no request both sent and answered during the outage is 200. (One
    // sent during it may reach the rate-limit check only after Redis is back, on a loaded machine, and be served.)
    expect(results.filter((r) => r.phase === 'down' && r.answeredIn === 'down' && r.status === 200)).toEqual([]);
    expect(count(results, 'down', 503)).toBeGreaterThanOrEqual(20);
    expectOnlyServedOrDependency503(results);
    await expectBooksBalance(t, id, results);
    // The real cause is in the log, not a stack of 500s.
    expect(t.logs.some((line) => line.includes('"dependency":"redis"') && line.includes('"err":{'))).toBe(true);
    expect(t.logs.filter((line) => line.includes('unhandled error'))).toEqual([]);
  });

  it('frozen (connections open, no answers): requests fail with 503 after the command timeout, then recover', async () => {
    t = await startTestGateway({ REDIS_URL: redis.url, READINESS_FAILURE_WINDOW_MS: '300', REDIS_COMMAND_TIMEOUT_MS: '200' });
    const { id, key } = await t.createKey({ credits_quota: 100_000, rate_limit_rpm: 100_000 });
    const results = await throughAFreeze(phasedTraffic(t, key), async () => {
      expect((await readiness(t)).body.error?.dependency).toBe('redis');
    });
    expectOnlyServedOrDependency503(results);
    await expectBooksBalance(t, id, results);
  });

  it('RATE_LIMIT_REDIS_FALLBACK=sql: the SQL limiter takes over, the limit still holds, the replica stays ready', async () => {
    t = await startTestGateway({ REDIS_URL: redis.url, RATE_LIMIT_REDIS_FALLBACK: 'sql' });
    const { id, key } = await t.createKey({ credits_quota: 100, rate_limit_rpm: 5 });
    await redis.kill();
    const statuses: number[] = [];
    for (let i = 0; i < 8; i += 1) statuses.push((await t.api.client(key, localRequest())).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
    expect((await readiness(t)).status).toBe(200);
    expect(await t.api.creditsUsed(id)).toBe(5);
    expect(t.logs.some((line) => line.includes('counted in the SQL limiter'))).toBe(true);
  });
  /**
   * With the SQL fallback the rate limit survives the outage, but a key's max_concurrent slots and an
   * admin channel's capacity live in Redis too and have no fallback: those requests are refused
   * with the same 503 at once (killed) or after the command timeout (frozen), never hang or 500.
   */
  describe('RATE_LIMIT_REDIS_FALLBACK=sql: what else lives in Redis', () => {
    const env = () => ({ REDIS_URL: redis.url, RATE_LIMIT_REDIS_FALLBACK: 'sql', REDIS_COMMAND_TIMEOUT_MS: '200', REDIS_CONNECT_TIMEOUT_MS: '500' });
    const expectNoUnhandledErrors = () => expect(t.logs.filter((line) => line.includes('unhandled error'))).toEqual([]);

    it("killed: a key's max_concurrent slots are refused with 503 at once; served again when Redis is back", async () => {
      t = await startTestGateway(env());
      const { id, key } = await t.createKey({ credits_quota: 100_000, rate_limit_rpm: 100_000, max_concurrent: 8 });
      const { traffic, setPhase } = phasedTraffic(t, key);
      await traffic.until((r) => count(r, 'before', 200) >= 10, 'traffic before the outage');

      await redis.kill();
      setPhase('down');
      await traffic.until((r) => count(r, 'down', 503) >= 20, '503s during the outage');
      setPhase('restarting');
      await redis.start();
      setPhase('back');
      await traffic.until((r) => count(r, 'back', 200) >= 10, 'traffic after Redis returned');
      const results = await traffic.stop();

      expect(results.filter((r) => r.phase === 'down' && r.answeredIn === 'down' && r.status === 200)).toEqual([]);
      expectOnlyServedOrDependency503(results);
      await expectBooksBalance(t, id, results);
      expectNoUnhandledErrors();
    });

    describe('an admin channel (its capacity is shared in Redis)', () => {
      const JIMENG = { prompt: 'a harbour', model: 'jimeng-4.5', size: '2048x2048' };
      const channel = (overrides: Record<string, unknown> = {}) => ({
        name: 'ark account',
        provider: 'jimeng',
        transport: 'ark',
        base_url: upstream.url,
        models: [{ model: 'jimeng-4.5' }],
        credentials: { api_key: 'ark-outage-key' },
        max_concurrency: 50,
        ...overrides,
      });
      let upstream: FakeImagesApi;
      beforeEach(async () => {
        upstream = await startFakeImagesApi({ apiKey: 'ark-outage-key', flavour: 'ark' });
      });
      afterEach(async () => {
        jest.restoreAllMocks();
        await upstream.close();
      });

      it("a breaker's half-open probe refused by Redis is given back: the channel serves again once Redis answers", async () => {
        t = await startTestGateway({ ...env(), PROVIDER_JIMENG_BREAKER_THRESHOLD: '1', PROVIDER_JIMENG_MAX_ATTEMPTS: '1' });
        expect((await t.api.admin('post', '/admin/channels', channel())).status).toBe(201);
        const { key } = await t.createKey({ allowed_providers: ['jimeng'], credits_quota: 1_000_000, rate_limit_rpm: 100_000 });
        upstream.setMode('failing');
        expect((await t.api.client(key, JIMENG)).status).toBe(502);
        // Open, then half-open after the cool-down: the next call is its one probe, and Redis does not answer it.
        t.clock.advanceMs(60_000);
        redis.freeze();
        const refused = await t.api.client(key, JIMENG);
        expect([refused.status, refused.body.error.code]).toEqual([503, 'dependency_unavailable']);
        redis.thaw();
        upstream.setMode('normal');
        const served = await t.api.client(key, JIMENG);
        expect([served.status, served.body.error?.code]).toEqual([200, undefined]);
      });

      it('a generation queued while Redis is down waits in the queue, runs once Redis is back, and is charged once', async () => {
        t = await startTestGateway({ ...env(), GENERATION_POLL_MS: '50' });
        // No max_concurrency: even an uncapped channel takes its slot (and its shared cool-down) from Redis.
        expect((await t.api.admin('post', '/admin/channels', channel({ max_concurrency: null }))).status).toBe(201);
        const { id: keyId, key } = await t.createKey({ allowed_providers: ['jimeng'], credits_quota: 1_000_000, rate_limit_rpm: 100_000 });
        const auth = { Authorization: `Bearer ${key}` };
        const statusOf = async (id: string) => (await t.api.send('get', `/generations/${id}`, { headers: auth })).body;
        await redis.kill();
        const submitted = await t.api.send('post', '/images/generate', { body: JIMENG, headers: { ...auth, Prefer: 'respond-async' } });
        expect(submitted.status).toBe(202);
        // Many worker ticks (every 50 ms) while Redis is down: none fails it.
        await new Promise((resolve) => setTimeout(resolve, 1500));
        expect((await statusOf(submitted.body.id)).status).toBe('queued');
        expect(upstream.requests).toHaveLength(0);
        await redis.start();
        await until(async () => (await statusOf(submitted.body.id)).status === 'succeeded', 'the queued generation to succeed', 20_000);
        expect((await statusOf(submitted.body.id)).usage).toMatchObject({ images: 1, credits_charged: 4 });
        expect(await t.api.creditsUsed(keyId)).toBe(4);
        expect(upstream.requests).toHaveLength(1);
      });

      it('a queued generation whose slot Redis refuses after it was claimed is run again later, not failed', async () => {
        t = await startTestGateway({ ...env(), GENERATION_POLL_MS: '50', GENERATION_LEASE_MS: '1000' });
        expect((await t.api.admin('post', '/admin/channels', channel())).status).toBe(201);
        const { id: keyId, key } = await t.createKey({ allowed_providers: ['jimeng'], credits_quota: 1_000_000, rate_limit_rpm: 100_000 });
        const auth = { Authorization: `Bearer ${key}` };
        const generationOf = async (id: string) => (await t.api.send('get', `/generations/${id}`, { headers: auth })).body;
        // Redis fails between the worker's room check and the slot, twice: the window a real outage can start in.
        const { sharedLimits } = (t.gateway.generation as unknown as { deps: { channels: { deps: { sharedLimits: ChannelLimitStore } } } }).deps.channels.deps;
        const outage = () => new DependencyUnavailableError('redis', new Error('Command timed out'));
        jest.spyOn(sharedLimits, 'acquire').mockRejectedValueOnce(outage()).mockRejectedValueOnce(outage());
        const submitted = await t.api.send('post', '/images/generate', { body: JIMENG, headers: { ...auth, Prefer: 'respond-async' } });
        expect(submitted.status).toBe(202);
        await until(async () => (await generationOf(submitted.body.id)).status === 'succeeded', 'the generation to succeed after two deferred runs', 20_000);
        expect(t.logs.filter((line) => line.includes('"msg":"background generation deferred')).length).toBe(2);
        expect((await generationOf(submitted.body.id)).usage).toMatchObject({ images: 1, credits_charged: 4 });
        expect(await t.api.creditsUsed(keyId)).toBe(4);
        expect(upstream.requests).toHaveLength(1);
      });

      it('frozen: generations on it are refused with 503 after the command timeout, then served again', async () => {
        t = await startTestGateway(env());
        expect((await t.api.admin('post', '/admin/channels', channel())).status).toBe(201);
        const { id, key } = await t.createKey({ allowed_providers: ['jimeng'], credits_quota: 1_000_000, rate_limit_rpm: 100_000 });
        const results = await throughAFreeze(phasedTraffic(t, key, 4, JIMENG));
        expectOnlyServedOrDependency503(results);
        await expectBooksBalance(t, id, results, 0, 4);
        expectNoUnhandledErrors();
      });
    });
  });
});
