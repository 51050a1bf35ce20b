import type { Response } from 'supertest';
import { countIn as count, expectBooksBalance, expectOnlyServedOrDependency503, phasedTraffic } from '../helpers/outage-traffic';
import { type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';
import { ThrowawayRedis, eventually } from '../helpers/throwaway-servers';

async function readiness(t: TestGateway): Promise<Response> {
  return t.api.send('get', '/readyz');
}

describe('Redis (the rate-limit store) fails while clients are sending', () => {
  let redis: ThrowawayRedis;
  let t: TestGateway;

  beforeEach(async () => {
    redis = await ThrowawayRedis.start();
  });
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
    await eventually(async () => (await readiness(t)).status === 200, '/readyz 200 after Redis returned');
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
    const { traffic, setPhase } = phasedTraffic(t, key);
    await traffic.until((r) => count(r, 'before', 200) >= 10, 'traffic before the outage');

    redis.freeze();
    setPhase('frozen');
    await traffic.until((r) => count(r, 'frozen', 503) >= 8, '503s while Redis is frozen');
    expect((await readiness(t)).body.error?.dependency).toBe('redis');

    setPhase('thawing');
    redis.thaw();
    setPhase('back');
    await traffic.until((r) => count(r, 'back', 200) >= 10, 'traffic after Redis thawed');
    const results = await traffic.stop();
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
    expect((await t.api.admin('get', `/admin/keys/${id}`)).body.credits_used).toBe(5);
    expect(t.logs.some((line) => line.includes('counted in the SQL limiter'))).toBe(true);
  });
});
