import request from 'supertest';
import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
import { type GatewayProcess, startGatewayProcess } from '../helpers/gateway-process';
import { createThrowawayDatabase } from '../helpers/test-database';
import { TEST_REDIS_URL, throwawayRedisPrefix } from '../helpers/test-redis';
import { ApiClient, createKeyVia } from '../helpers/test-gateway';
import { until } from '../helpers/until';

const generate = (url: string, key: string, prompt: string) =>
  request(url).post('/images/generate').set('Authorization', `Bearer ${key}`).send({ prompt, model: 'jimeng-4.5' });

/** max_concurrent across real processes: the cap is exact, and a SIGKILLed replica's slots come back after its lease. */
function concurrencySuite(name: string, storage: () => Promise<{ env: Record<string, string>; drop(): Promise<void> }>, replicaCount: number, crash = true) {
  describe(name, () => {
    let ark: FakeImagesApi;
    let dropStorage: () => Promise<void>;
    let processes: GatewayProcess[] = [];
    let env: Record<string, string>;

    beforeAll(async () => {
      ark = await startFakeImagesApi({ apiKey: 'k', flavour: 'ark' });
      const store = await storage();
      dropStorage = store.drop;
      env = { ...store.env, ARK_API_KEY: 'k', ARK_BASE_URL: ark.url, KEY_LEASE_TTL_MS: '1000' };
      processes = [await startGatewayProcess(env)];
      for (let i = 1; i < replicaCount; i++) processes.push(await startGatewayProcess(env));
    });
    afterAll(async () => {
      ark.releaseHeld();
      await Promise.all(processes.map((p) => p.stop()));
      await ark.close();
      await dropStorage();
    });

    it(`max_concurrent 3, 12 held requests over ${replicaCount} replicas: exactly 3 run, 9 get 429 and are not charged`, async () => {
      const { id, key } = await createKeyVia(new ApiClient(processes[0]!.url), { allowed_providers: ['jimeng'], max_concurrent: 3, credits_quota: 1000 });
      const prompt = `cap ${id} [hold]`;
      const responses = Array.from({ length: 12 }, (_, i) => generate(processes[i % processes.length]!.url, key, prompt));
      const refused: number[] = [];
      for (const response of responses) void response.then((r) => r.status === 429 && refused.push(r.status));
      await until(() => refused.length === 9, '9 refusals');
      // The 3 admitted ones may still be on their way to the upstream (channel routing, limits).
      await until(() => ark.requests.filter((r) => r.prompt === prompt).length >= 3, '3 upstream calls');
      expect(ark.requests.filter((r) => r.prompt === prompt)).toHaveLength(3);
      const record = await new ApiClient(processes[1 % processes.length]!.url).admin('get', `/admin/keys/${id}`);
      expect(record.body.credits_used).toBe(12);
      ark.releaseHeld();
      const statuses = (await Promise.all(responses)).map((r) => r.status).sort();
      expect(statuses).toEqual([...Array(3).fill(200), ...Array(9).fill(429)]);
      for (const r of await Promise.all(responses)) if (r.status === 429) expect(r.body.error.code).toBe('concurrency_limited');
    });

    (crash ? it : it.skip)('a replica holding the only slot: others refused; SIGKILLed, the slot is free again after its lease', async () => {
      const victim = await startGatewayProcess(env);
      const { id, key } = await createKeyVia(new ApiClient(victim.url), { allowed_providers: ['jimeng'], max_concurrent: 1 });
      const prompt = `dies ${id} [hold]`;
      const held = generate(victim.url, key, prompt).catch(() => undefined);
      await until(() => ark.requests.some((r) => r.prompt === prompt), 'the held generation');
      // Held by the victim: another replica is refused.
      const survivor = processes[0]!.url;
      const first = await generate(survivor, key, `after ${id}`);
      expect(first.body.error?.code).toBe('concurrency_limited');
      await victim.stop('SIGKILL');
      await held;
      let last = first;
      await until(async () => {
        last = await generate(survivor, key, `after ${id}`);
        return last.status !== 429;
      }, "the dead replica's lease to lapse");
      expect(last.status).toBe(200);
    });
  });
}

concurrencySuite(
  'max_concurrent on PostgreSQL + Redis (leases in Redis)',
  async () => {
    const database = await createThrowawayDatabase('postgres');
    const redis = throwawayRedisPrefix();
    return {
      env: { DATABASE_URL: database.url, REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: redis.prefix },
      drop: async () => {
        await database.drop();
        await redis.drop();
      },
    };
  },
  3,
);

concurrencySuite(
  'max_concurrent on PostgreSQL without Redis (leases in SQL)',
  async () => {
    const database = await createThrowawayDatabase('postgres');
    return { env: { DATABASE_URL: database.url }, drop: () => database.drop() };
  },
  // Two replicas are enough for the advisory lock, and keep the suite's process count down.
  2,
  // The crash case of SQL leases runs on SQLite below; here the advisory-lock path of the cap.
  false,
);

concurrencySuite(
  'max_concurrent on one SQLite file (leases in SQL)',
  async () => {
    const database = await createThrowawayDatabase('sqlite');
    return { env: { DATABASE_URL: database.url }, drop: () => database.drop() };
  },
  2,
);
