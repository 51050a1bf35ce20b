import { ApiClient, createKeyVia as createKey, localRequest } from '../helpers/test-gateway';
import { type GatewayProcess, startGatewayProcess } from '../helpers/gateway-process';
import { createThrowawayDatabase, describeWithServices, type ThrowawayDatabase } from '../helpers/test-database';
import { TEST_REDIS_URL, throwawayRedisPrefix } from '../helpers/test-redis';

/** Fires `count` requests at once, spread round-robin over the replicas; returns the statuses. */
async function hammer(replicas: ApiClient[], key: string, count: number): Promise<number[]> {
  const results = await Promise.all(Array.from({ length: count }, (_, i) => replicas[i % replicas.length]!.client(key, localRequest())));
  return results.map((r) => r.status);
}

const count = (statuses: number[], status: number) => statuses.filter((s) => s === status).length;

describeWithServices('3 gateway processes on one PostgreSQL + Redis', () => {
  let database: ThrowawayDatabase;
  let redis: ReturnType<typeof throwawayRedisPrefix>;
  let processes: GatewayProcess[] = [];
  let replicas: ApiClient[];

  beforeAll(async () => {
    database = await createThrowawayDatabase('postgres');
    redis = throwawayRedisPrefix();
    const env = { DATABASE_URL: database.url, REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: redis.prefix };
    // Migrations lock on PostgreSQL, so replicas may start together.
    processes = await Promise.all([startGatewayProcess(env), startGatewayProcess(env), startGatewayProcess(env)]);
    replicas = processes.map((p) => new ApiClient(p.url));
  });
  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop()));
    await database.drop();
    await redis.drop();
  });

  it('10 credits, 100 concurrent requests over 3 replicas: exactly 10 succeed', async () => {
    const { id, key } = await createKey(replicas[0]!, { credits_quota: 10 });
    const statuses = await hammer(replicas, key, 100);
    expect([count(statuses, 200), count(statuses, 402)]).toEqual([10, 90]);
    expect(await replicas[2]!.creditsUsed(id)).toBe(10);
  });

  it('rpm 20, 100 concurrent requests over 3 replicas: exactly 20 pass inside the window', async () => {
    const { key } = await createKey(replicas[0]!, { rate_limit_rpm: 20 });
    const statuses = await hammer(replicas, key, 100);
    expect([count(statuses, 200), count(statuses, 429)]).toEqual([20, 80]);
  });

  it('a key disabled on replica 1 is refused on replica 3 within 1 s', async () => {
    const { id, key } = await createKey(replicas[0]!, {});
    expect((await replicas[2]!.client(key, localRequest())).status).toBe(200);
    await replicas[0]!.admin('delete', `/admin/keys/${id}`);
    const disabledAt = Date.now();
    let res = await replicas[2]!.client(key, localRequest());
    while (res.status === 200 && Date.now() - disabledAt < 1000) res = await replicas[2]!.client(key, localRequest());
    expect(res.body.error?.code).toBe('key_disabled');
    expect(Date.now() - disabledAt).toBeLessThan(1000);
  });

  it('a re-quota on replica 2 applies on replica 1 at once', async () => {
    const { id, key } = await createKey(replicas[0]!, { credits_quota: 1 });
    expect((await replicas[0]!.client(key, localRequest())).status).toBe(200);
    expect((await replicas[0]!.client(key, localRequest())).status).toBe(402);
    await replicas[1]!.admin('post', `/admin/keys/${id}/quota`, { credits_quota: 2 });
    expect((await replicas[0]!.client(key, localRequest())).status).toBe(200);
  });
});

describe('2 gateway processes on one SQLite file', () => {
  let database: ThrowawayDatabase;
  let processes: GatewayProcess[] = [];
  let replicas: ApiClient[];

  beforeAll(async () => {
    database = await createThrowawayDatabase('sqlite');
    const env = { DATABASE_URL: database.url, RATE_LIMIT_STORE: 'sql' };
    processes = [await startGatewayProcess(env)];
    processes.push(await startGatewayProcess(env));
    replicas = processes.map((p) => new ApiClient(p.url));
  });
  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop()));
    await database.drop();
  });

  it('10 credits, 60 concurrent requests over 2 processes: exactly 10 succeed', async () => {
    const { id, key } = await createKey(replicas[0]!, { credits_quota: 10 });
    const statuses = await hammer(replicas, key, 60);
    expect([count(statuses, 200), count(statuses, 402)]).toEqual([10, 50]);
    expect(await replicas[1]!.creditsUsed(id)).toBe(10);
  });

  it('with RATE_LIMIT_STORE=sql the RPM holds across both processes', async () => {
    const { key } = await createKey(replicas[0]!, { rate_limit_rpm: 20 });
    const statuses = await hammer(replicas, key, 60);
    expect([count(statuses, 200), count(statuses, 429)]).toEqual([20, 40]);
  });
});
