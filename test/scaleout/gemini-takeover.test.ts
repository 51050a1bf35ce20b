import { type GatewayDatabase, openDatabase } from '../../src/db/database';
import { type FakeGemini, startFakeGemini } from '../fakes/fake-gemini';
import { Books } from '../helpers/books';
import { type GatewayProcess, startGatewayProcess } from '../helpers/gateway-process';
import { createThrowawayDatabase, describeWithServices, type ThrowawayDatabase } from '../helpers/test-database';
import { ApiClient, createKeyVia } from '../helpers/test-gateway';
import { TEST_REDIS_URL, throwawayRedisPrefix } from '../helpers/test-redis';
import { until } from '../helpers/until';

const GEMINI_API_KEY = 'gemini-takeover-key-0001';

/**
 * Issue #36 §2 "takeover by another replica without a second upstream submission", for the `gemini`
 * format (the harness of fal-takeover.test.ts). `generateContent` answers at once: there is no task to
 * resume, only calls that were sent. An asynchronous generation of two images has both calls held by
 * the fake when the process running it is SIGKILLed; the process that takes it over once the lease
 * lapsed finds both marked sent without an answer: it never sends them again (Google may have billed
 * them), fails the generation as `abandoned`, releases the key's credits and lists the two images as
 * the operator's loss; the books stay exact.
 */
async function takeover(setup: { gemini: FakeGemini; observer: GatewayDatabase; receiver: GatewayProcess; owner: () => Promise<GatewayProcess>; survivor: (dead: GatewayProcess) => Promise<GatewayProcess> }) {
  const { gemini, observer, receiver } = setup;
  const created = await createKeyVia(new ApiClient(receiver.url), { credits_quota: 100, allowed_providers: ['google'] });
  const prompt = 'a harbour at dusk, taken over [hold]';
  const submitted = await new ApiClient(receiver.url).send('post', '/images/generate', {
    headers: { Authorization: `Bearer ${created.key}`, Prefer: 'respond-async' },
    body: { prompt, model: 'gemini-3-pro-image', size: '2048x2048', n: 2 },
  });
  expect(submitted.status).toBe(202);
  const generationId = submitted.body.id as string;
  const generation = () => observer.db.selectFrom('generations').selectAll().where('id', '=', generationId).executeTakeFirstOrThrow();
  const callsOf = () => gemini.calls.filter((c) => JSON.stringify(c.body).includes(prompt));

  // Both calls written to Gemini (one per image) and held there, then the process running them dies.
  await until(() => callsOf().length === 2, 'both calls to reach Gemini');
  expect((await generation()).status).toBe('running');
  expect((await new ApiClient(receiver.url).admin('get', `/admin/keys/${created.id}`)).body.credits_used).toBe(28);
  const doomed = await setup.owner();
  await doomed.stop('SIGKILL');
  gemini.releaseHeld();

  const survivor = await setup.survivor(doomed);
  await until(async () => (await generation()).status === 'failed', 'the takeover to settle the generation', 40_000);
  const after = await generation();
  expect(after).toMatchObject({ error_code: 'abandoned', unbilled_reason: 'abandoned' });
  expect(Number(after.unbilled_images)).toBe(2);
  // Never sent a second time: Google may have made (and billed) both images already.
  expect(callsOf()).toHaveLength(2);
  const key = await new ApiClient(survivor.url).admin('get', `/admin/keys/${created.id}`);
  expect(key.body.credits_used).toBe(0);
  expect(await new Books(observer.db).violations({ settled: true })).toEqual([]);
}

describe('gemini: SIGKILL while both calls are at Gemini, restart, takeover (SQLite)', () => {
  let gemini: FakeGemini;
  let database: ThrowawayDatabase;
  let observer: GatewayDatabase;
  const started: GatewayProcess[] = [];

  beforeAll(async () => {
    gemini = await startFakeGemini({ apiKey: GEMINI_API_KEY });
    database = await createThrowawayDatabase('sqlite');
  });
  afterAll(async () => {
    await Promise.all(started.map((p) => p.stop('SIGKILL')));
    await observer?.close();
    await gemini.close();
    await database.drop();
  });

  it('the restarted gateway settles it as abandoned without sending either call again; the key is charged nothing', async () => {
    const env = { DATABASE_URL: database.url, GEMINI_API_KEY, GEMINI_BASE_URL: gemini.url, GENERATION_LEASE_MS: '1000', GENERATION_POLL_MS: '100' };
    const first = await startGatewayProcess(env);
    started.push(first);
    observer = openDatabase(database.url, { poolSize: 1 });
    await takeover({
      gemini,
      observer,
      receiver: first,
      owner: async () => first,
      survivor: async () => {
        const second = await startGatewayProcess(env);
        started.push(second);
        return second;
      },
    });
  });
});

describeWithServices('gemini: 2 replicas on PostgreSQL + Redis, the one running the generation SIGKILLed', () => {
  let gemini: FakeGemini;
  let database: ThrowawayDatabase;
  let redis: ReturnType<typeof throwawayRedisPrefix>;
  let observer: GatewayDatabase;
  const replicas: GatewayProcess[] = [];

  beforeAll(async () => {
    gemini = await startFakeGemini({ apiKey: GEMINI_API_KEY });
    database = await createThrowawayDatabase('postgres');
    redis = throwawayRedisPrefix();
    const env = {
      DATABASE_URL: database.url,
      REDIS_URL: TEST_REDIS_URL,
      REDIS_PREFIX: redis.prefix,
      GEMINI_API_KEY,
      GEMINI_BASE_URL: gemini.url,
      GENERATION_LEASE_MS: '1000',
      GENERATION_POLL_MS: '100',
    };
    // One after the other: several cold starts at once can miss the start deadline on a loaded machine.
    for (let i = 0; i < 2; i += 1) replicas.push(await startGatewayProcess(env));
    observer = openDatabase(database.url, { poolSize: 2 });
  }, 120_000);
  afterAll(async () => {
    await Promise.all(replicas.map((p) => p.stop('SIGKILL')));
    await observer?.close();
    await gemini?.close();
    await database?.drop();
    await redis?.drop();
  });

  it('the surviving replica settles it as abandoned: no second submission, the key charged nothing', async () => {
    const generationOwner = async () => {
      const running = await observer.db.selectFrom('generations').select('lease_owner').where('status', '=', 'running').executeTakeFirstOrThrow();
      // The lease owner is host:pid:random.
      return replicas.find((p) => running.lease_owner?.split(':')[1] === String(p.child.pid))!;
    };
    await takeover({ gemini, observer, receiver: replicas[0]!, owner: generationOwner, survivor: async (dead) => replicas.find((p) => p !== dead)! });
  });
});
