import request from 'supertest';
import { type GatewayDatabase, openDatabase } from '../../src/db/database';
import { type FakeBfl, startFakeBfl } from '../fakes/fake-bfl';
import { Books } from '../helpers/books';
import { type GatewayProcess, startGatewayProcess } from '../helpers/gateway-process';
import { createThrowawayDatabase, describeWithServices, type ThrowawayDatabase } from '../helpers/test-database';
import { ApiClient, createKeyVia } from '../helpers/test-gateway';
import { TEST_REDIS_URL, throwawayRedisPrefix } from '../helpers/test-redis';
import { until } from '../helpers/until';

const API_KEY = 'bfl-takeover-key-0001';

/**
 * "Resume, never repeat" for BFL: a gateway process SIGKILLed while BFL holds its tasks. Another
 * process takes the generation over once its lease lapsed and polls the stored polling URLs: the fake
 * sees one submission per image, the books charge exactly the images delivered. On SQLite (the
 * process restarted) and on PostgreSQL + Redis (a surviving replica).
 */
const engines: Array<['sqlite' | 'postgres', typeof describe]> = [
  ['sqlite', describe],
  ['postgres', describeWithServices],
];

for (const [engine, describeEngine] of engines) {
  describeEngine(`bfl takeover after SIGKILL (${engine})`, () => {
    let bfl: FakeBfl;
    let database: ThrowawayDatabase;
    let observer: GatewayDatabase;
    let dropRedis: (() => Promise<void>) | undefined;
    let env: Record<string, string>;
    const started: GatewayProcess[] = [];

    beforeAll(async () => {
      bfl = await startFakeBfl({ apiKey: API_KEY });
      database = await createThrowawayDatabase(engine);
      const redis = engine === 'postgres' ? throwawayRedisPrefix() : undefined;
      dropRedis = redis && (() => redis.drop());
      env = {
        DATABASE_URL: database.url,
        ...(redis ? { REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: redis.prefix } : {}),
        BFL_API_KEY: API_KEY,
        BFL_BASE_URL: bfl.url,
        UPSTREAM_POLL_INTERVAL_MS: '20',
        GENERATION_LEASE_MS: '1000',
        GENERATION_POLL_MS: '100',
      };
      started.push(await startGatewayProcess(env));
      // PostgreSQL: a second replica already running, which takes the generation over.
      if (engine === 'postgres') started.push(await startGatewayProcess(env));
      observer = openDatabase(database.url, { poolSize: 2 });
    }, 120_000);
    afterAll(async () => {
      await Promise.all(started.map((p) => p.stop('SIGKILL')));
      await observer?.close();
      await bfl?.close();
      await database?.drop();
      await dropRedis?.();
    });

    it('the task ids (polling URLs) are stored, the owner dies, another process polls them: one submission per image, charged = delivered', async () => {
      const [doomed] = started as [GatewayProcess];
      const created = await createKeyVia(new ApiClient(doomed.url), { credits_quota: 100, allowed_providers: ['bfl'] });
      const books = new Books(observer.db);
      const prompt = 'a harbour at night [hold]';
      const inFlight = request(doomed.url)
        .post('/images/generate')
        .set('Authorization', `Bearer ${created.key}`)
        .send({ prompt, model: 'flux-pro-1.1', size: '1024x768', n: 2 })
        .then(
          () => 'answered',
          () => 'connection lost',
        );
      const tasks = () => observer.db.selectFrom('generation_tasks').selectAll().orderBy('image_index').execute();
      await until(async () => (await tasks()).filter((t) => t.task_id !== null).length === 2, 'both polling URLs stored');
      // The handles are the polling URLs BFL answered.
      for (const task of await tasks()) expect(task.task_id).toMatch(new RegExp(`^${bfl.url}/v1/get_result\\?id=[0-9a-f-]+$`));
      await doomed.stop('SIGKILL');
      expect(await inFlight).toBe('connection lost');
      const generation = () => observer.db.selectFrom('generations').selectAll().executeTakeFirstOrThrow();
      expect((await generation()).status).toBe('running');

      if (engine === 'sqlite') started.push(await startGatewayProcess(env));
      const survivor = started.at(-1)!;
      bfl.releaseHeld();
      await until(async () => (await generation()).status === 'succeeded', 'the takeover to finish the generation', 30_000);
      const after = await generation();
      expect(Number(after.runs)).toBe(2);
      // Resumed, never repeated: the two tasks the dead process submitted, polled to their end.
      expect(bfl.received.filter((r) => r.body.prompt === prompt)).toHaveLength(2);
      const ids = (await tasks()).map((t) => new URL(t.task_id!).searchParams.get('id'));
      expect([...bfl.downloads].filter((id) => ids.includes(id)).sort()).toEqual([...ids].sort());
      const stored = await observer.db.selectFrom('stored_images').select('id').where('generation_id', '=', after.id).execute();
      expect(stored).toHaveLength(2);
      const key = await new ApiClient(survivor.url).admin('get', `/admin/keys/${created.id}`);
      expect(key.body.credits_used).toBe(8);
      expect(Number(after.credits)).toBe(8);
      expect(await books.violations({ settled: true })).toEqual([]);
    });
  });
}
