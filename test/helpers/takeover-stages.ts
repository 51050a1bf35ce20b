import { type GatewayDatabase, openDatabase } from '../../src/db/database';
import { Books } from './books';
import { type GatewayProcess, startGatewayProcess } from './gateway-process';
import { createThrowawayDatabase, describeWithServices, type ThrowawayDatabase } from './test-database';
import { ApiClient } from './test-gateway';
import { TEST_REDIS_URL, throwawayRedisPrefix } from './test-redis';
import { until } from './until';

/** Where a takeover scenario runs: the process it sends to, the one to kill, and the one that takes over. */
export interface TakeoverStage {
  observer: GatewayDatabase;
  receiver: GatewayProcess;
  /** The process running the generation (to SIGKILL). */
  owner: () => Promise<GatewayProcess>;
  /** The process that takes the generation over once `dead` is gone. */
  survivor: (dead: GatewayProcess) => Promise<GatewayProcess>;
}

/** Leases short enough that a dead process's generation is taken over within a test. */
const FAST_TAKEOVER = { GENERATION_LEASE_MS: '1000', GENERATION_POLL_MS: '100' };

/**
 * Runs a format's takeover scenario (issue #36 §2: "takeover by another replica without a second
 * upstream submission") on both stages of durable-generations.test.ts: one gateway on SQLite,
 * SIGKILLed and started again; and two replicas on PostgreSQL + Redis, the one running the
 * generation SIGKILLed. Each stage has its own fake upstream, started by `startFake`.
 */
export function describeTakeovers<F extends { close(): Promise<void> }>(
  subject: string,
  setup: {
    when: string;
    startFake: () => Promise<F>;
    env: (fake: F) => Record<string, string>;
    outcome: string;
    run: (fake: F, stage: TakeoverStage) => Promise<void>;
  },
): void {
  describe(`${subject}: SIGKILL ${setup.when}, restart, takeover (SQLite)`, () => {
    let fake: F;
    let database: ThrowawayDatabase;
    let observer: GatewayDatabase;
    const started: GatewayProcess[] = [];

    beforeAll(async () => {
      fake = await setup.startFake();
      database = await createThrowawayDatabase('sqlite');
    });
    afterAll(async () => {
      await Promise.all(started.map((p) => p.stop('SIGKILL')));
      await observer?.close();
      await fake.close();
      await database.drop();
    });

    it(`the restarted gateway: ${setup.outcome}`, async () => {
      const env = { DATABASE_URL: database.url, ...FAST_TAKEOVER, ...setup.env(fake) };
      const first = await startGatewayProcess(env);
      started.push(first);
      observer = openDatabase(database.url, { poolSize: 1 });
      await setup.run(fake, {
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

  describeWithServices(`${subject}: 2 replicas on PostgreSQL + Redis, the one running the generation SIGKILLed`, () => {
    let fake: F;
    let database: ThrowawayDatabase;
    let redis: ReturnType<typeof throwawayRedisPrefix>;
    let observer: GatewayDatabase;
    const replicas: GatewayProcess[] = [];

    beforeAll(async () => {
      fake = await setup.startFake();
      database = await createThrowawayDatabase('postgres');
      redis = throwawayRedisPrefix();
      const env = { DATABASE_URL: database.url, REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: redis.prefix, ...FAST_TAKEOVER, ...setup.env(fake) };
      // One after the other: several cold starts at once can miss the start deadline on a loaded machine.
      for (let i = 0; i < 2; i += 1) replicas.push(await startGatewayProcess(env));
      observer = openDatabase(database.url, { poolSize: 2 });
    }, 120_000);
    afterAll(async () => {
      await Promise.all(replicas.map((p) => p.stop('SIGKILL')));
      await observer?.close();
      await fake?.close();
      await database?.drop();
      await redis?.drop();
    });

    it(`the surviving replica: ${setup.outcome}`, async () => {
      const generationOwner = async () => {
        const running = await observer.db.selectFrom('generations').select('lease_owner').where('status', '=', 'running').executeTakeFirstOrThrow();
        // The lease owner is host:pid:random.
        return replicas.find((p) => running.lease_owner?.split(':')[1] === String(p.child.pid))!;
      };
      await setup.run(fake, { observer, receiver: replicas[0]!, owner: generationOwner, survivor: async (dead) => replicas.find((p) => p !== dead)! });
    });
  });
}

/**
 * The end of a takeover of calls that answer at once (no task to resume, only calls that were sent):
 * the process running the generation is SIGKILLed while its calls are held upstream; the process that
 * takes it over finds them marked sent without an answer, never sends them again (the upstream may
 * have made and billed the images), fails the generation as `abandoned`, releases the key's credits
 * and lists `images` as the operator's loss; the books stay exact.
 */
export async function expectAbandonedAfterKill(
  setup: TakeoverStage,
  scenario: { generationId: string; keyId: string; images: number; release: () => void; calls: () => number },
): Promise<void> {
  const { observer } = setup;
  const generation = () => observer.db.selectFrom('generations').selectAll().where('id', '=', scenario.generationId).executeTakeFirstOrThrow();
  expect((await generation()).status).toBe('running');
  const sent = scenario.calls();
  const doomed = await setup.owner();
  await doomed.stop('SIGKILL');
  scenario.release();

  const survivor = await setup.survivor(doomed);
  await until(async () => (await generation()).status === 'failed', 'the takeover to settle the generation', 40_000);
  const after = await generation();
  expect(after).toMatchObject({ error_code: 'abandoned', unbilled_reason: 'abandoned' });
  expect(Number(after.unbilled_images)).toBe(scenario.images);
  expect(scenario.calls()).toBe(sent);
  expect(await new ApiClient(survivor.url).creditsUsed(scenario.keyId)).toBe(0);
  expect(await new Books(observer.db).violations({ settled: true })).toEqual([]);
}
