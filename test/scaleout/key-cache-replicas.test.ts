import { ApiClient, createKeyVia as createKey, localRequest } from '../helpers/test-gateway';
import { type GatewayProcess, startGatewayProcess } from '../helpers/gateway-process';
import { createThrowawayDatabase, describeWithServices, type ThrowawayDatabase } from '../helpers/test-database';
import { TEST_REDIS_URL, throwawayRedisPrefix } from '../helpers/test-redis';

/**
 * Admin changes of a key made on one replica, seen by another that has just used the key (on
 * PostgreSQL + Redis its row is in that replica's key cache, src/keys/key-cache.ts, invalidated
 * through Redis; on SQLite each process caches too, and another process's commit to the file empties
 * the cache through SQLite's data_version). The reservation re-checks status, expiry and the secret's hash on the row, so a
 * generation is refused by the first request after the change; what the cache decides alone
 * (rate limit, allowlists, reads) follows when the invalidation message arrives (well within 1 s).
 */
function keyChangesAcrossReplicas(start: () => Promise<{ processes: GatewayProcess[]; drop: () => Promise<void> }>) {
  let processes: GatewayProcess[] = [];
  let drop: () => Promise<void>;
  let a: ApiClient;
  let b: ApiClient;

  beforeAll(async () => {
    ({ processes, drop } = await start());
    [a, b] = processes.map((p) => new ApiClient(p.url)) as [ApiClient, ApiClient];
  });
  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop()));
    await drop();
  });

  /** Repeats `attempt` until `done` holds or 1 s passed; returns the last response. */
  async function within1s(attempt: () => ReturnType<ApiClient['client']>, done: (res: Awaited<ReturnType<ApiClient['client']>>) => boolean) {
    const since = Date.now();
    let res = await attempt();
    while (!done(res) && Date.now() - since < 1000) res = await attempt();
    return res;
  }

  it('disabled on A: the very next generation on B is refused (key_disabled) and nothing is charged', async () => {
    const { id, key } = await createKey(a, { credits_quota: 10 });
    expect((await b.client(key, localRequest())).status).toBe(200);
    expect((await a.admin('delete', `/admin/keys/${id}`)).status).toBe(200);
    const res = await b.client(key, localRequest());
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('key_disabled');
    expect(await a.creditsUsed(id)).toBe(1);
    // Re-enabled on A: B serves it again.
    await a.admin('patch', `/admin/keys/${id}`, { status: 'active' });
    expect(
      (
        await within1s(
          () => b.client(key, localRequest()),
          (r) => r.status === 200,
        )
      ).status,
    ).toBe(200);
  });

  it('rotated on A: the old secret cannot generate on B from the next request, the new one can at once', async () => {
    const { id, key } = await createKey(a, { credits_quota: 10 });
    expect((await b.client(key, localRequest())).status).toBe(200);
    const rotated = await a.admin('post', `/admin/keys/${id}/rotate`);
    expect(rotated.status).toBe(200);
    const old = await b.client(key, localRequest());
    expect(old.status).toBe(401);
    expect(old.body.error.code).toBe('invalid_api_key');
    expect((await b.client(rotated.body.key as string, localRequest())).status).toBe(200);
    // Reads with the old secret stop too, once the change reached B.
    const read = await within1s(
      () => b.send('get', '/v1/models', { headers: { Authorization: `Bearer ${key}` } }),
      (r) => r.status === 401,
    );
    expect(read.body.error.code).toBe('invalid_api_key');
    expect(await a.creditsUsed(id)).toBe(2);
  });

  it('expired on A: refused on B at once', async () => {
    const { id, key } = await createKey(a, {});
    expect((await b.client(key, localRequest())).status).toBe(200);
    const past = new Date(Date.now() + 1500).toISOString();
    expect((await a.admin('patch', `/admin/keys/${id}`, { expires_at: past })).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 1600));
    const res = await b.client(key, localRequest());
    expect(res.body.error?.code).toBe('key_expired');
  });

  it('rate limit lowered on A: applies on B within 1 s', async () => {
    const { id, key } = await createKey(a, { rate_limit_rpm: 1000 });
    expect((await b.client(key, localRequest())).status).toBe(200);
    expect((await a.admin('patch', `/admin/keys/${id}`, { rate_limit_rpm: 1 })).status).toBe(200);
    const res = await within1s(
      () => b.client(key, localRequest()),
      (r) => r.status === 429,
    );
    expect(res.body.error.code).toBe('rate_limited');
  });

  it('project disabled on A: B refuses its keys from the next generation (project_disabled), nothing charged; narrowed on A: applies on B within 1 s', async () => {
    const project = await a.admin('post', '/admin/projects', { name: 'p', owner: 'o@example.com', credits_quota: 10, quota_period_days: 30 });
    expect(project.status).toBe(201);
    const projectId = project.body.id as string;
    const { id, key } = await createKey(a, { credits_quota: 10, project_id: projectId });
    expect((await b.client(key, localRequest())).status).toBe(200);
    expect((await a.admin('delete', `/admin/projects/${projectId}`)).status).toBe(200);
    const res = await b.client(key, localRequest());
    expect([res.status, res.body.error.code]).toEqual([403, 'project_disabled']);
    expect(await a.creditsUsed(id)).toBe(1);
    expect((await a.admin('get', `/admin/projects/${projectId}`)).body.credits_used).toBe(1);
    expect((await a.admin('patch', `/admin/projects/${projectId}`, { status: 'active', allowed_providers: ['jimeng'] })).status).toBe(200);
    // B may still hold the disabled project for up to 1 s: wait for the narrowing, not for any 403.
    const narrowed = await within1s(
      () => b.client(key, localRequest()),
      (r) => r.body.error?.code === 'project_provider_not_allowed',
    );
    expect(narrowed.body.error.code).toBe('project_provider_not_allowed');
  });

  it('quota lowered on A: B refuses at once (the quota is always the row)', async () => {
    const { id, key } = await createKey(a, { credits_quota: 10 });
    expect((await b.client(key, localRequest())).status).toBe(200);
    await a.admin('post', `/admin/keys/${id}/quota`, { credits_quota: 1 });
    const res = await b.client(key, localRequest());
    expect(res.status).toBe(402);
    expect(res.body.error.message).toContain('the key has 0 of its 1 left');
  });
}

describeWithServices('key changes across 2 replicas on PostgreSQL + Redis (key cache on)', () => {
  keyChangesAcrossReplicas(async () => {
    const database: ThrowawayDatabase = await createThrowawayDatabase('postgres');
    const redis = throwawayRedisPrefix();
    const env = { DATABASE_URL: database.url, REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: redis.prefix };
    const processes = await Promise.all([startGatewayProcess(env), startGatewayProcess(env)]);
    return {
      processes,
      drop: async () => {
        await database.drop();
        await redis.drop();
      },
    };
  });
});

describe("key changes across 2 processes on one SQLite file (each its key cache, emptied by the other's commits)", () => {
  keyChangesAcrossReplicas(async () => {
    const database: ThrowawayDatabase = await createThrowawayDatabase('sqlite');
    const env = { DATABASE_URL: database.url, RATE_LIMIT_STORE: 'sql' };
    const processes = [await startGatewayProcess(env)];
    processes.push(await startGatewayProcess(env));
    return { processes, drop: () => database.drop() };
  });
});
