import Redis from 'ioredis';
import pino from 'pino';
import { openDatabase, type GatewayDatabase } from '../../src/db/database';
import { migrateToLatest } from '../../src/db/migrations';
import { type ConcurrencyLeases, createConcurrencyLeases, type HeldLease } from '../../src/keys/concurrency-leases';
import { systemClock } from '../../src/shared/clock';
import { createThrowawayDatabase, sqliteOnly, testEngine, type ThrowawayDatabase } from '../helpers/test-database';
import { TEST_REDIS_URL, throwawayRedisPrefix } from '../helpers/test-redis';
import { unlessStalled } from '../helpers/unless-stalled';

// Long enough that a loaded CI machine (event loop stalls of a few hundred ms) does not lapse a renewed lease.
const TTL_MS = 1000;
// Renewed every TTL / 3, a lease lapses only when its holder stalls for about 2/3 of the TTL.
const MAX_STALL_MS = TTL_MS / 2;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A key's max_concurrent slots are leases that lapse TTL after their last renewal: the process
 * holding them renews them all from one timer while it holds any, in batches. Checked on the
 * database store (the suite's engine) and on Redis.
 */
describe.each([
  ['the database', false],
  ['Redis', true],
] as const)('concurrency leases in %s', (_store, onRedis) => {
  const run = onRedis && sqliteOnly ? it.skip : it;
  let throwaway: ThrowawayDatabase;
  let database: GatewayDatabase;
  let redis: ReturnType<typeof throwawayRedisPrefix>;
  // The gateway's connection, which the leases share with other stores and do not close.
  let connection: Redis | undefined;
  let leases: ConcurrencyLeases;
  const newLeases = () =>
    createConcurrencyLeases({
      db: database.db,
      redis: connection,
      redisPrefix: redis.prefix,
      clock: systemClock,
      ttlMs: TTL_MS,
      logger: pino({ level: 'silent' }),
    });

  beforeEach(async () => {
    throwaway = await createThrowawayDatabase(testEngine);
    database = openDatabase(throwaway.url);
    await migrateToLatest(database.db as never, database.engine);
    redis = throwawayRedisPrefix();
    connection = onRedis ? new Redis(TEST_REDIS_URL) : undefined;
    leases = newLeases();
  });
  afterEach(async () => {
    jest.restoreAllMocks();
    await leases.close();
    await database.close();
    await throwaway.drop();
    await connection?.quit();
    if (onRedis) await redis.drop();
  });

  run(
    'a held slot outlives several TTLs while held (renewed), and frees at once on release',
    async () => {
      await unlessStalled(MAX_STALL_MS, async (round) => {
        const key = `key_a${round}`;
        const held = await leases.acquire(key, 2);
        const second = await leases.acquire(key, 2);
        expect(held).toBeDefined();
        expect(second).toBeDefined();
        try {
          for (let i = 0; i < 4; i += 1) {
            await sleep(TTL_MS);
            expect(await leases.acquire(key, 2)).toBeUndefined();
          }
          await held!.release();
          const third = await leases.acquire(key, 2);
          expect(third).toBeDefined();
          await third!.release();
        } finally {
          await held!.release();
          await second!.release();
        }
      });
    },
    30_000,
  );

  run(
    '600 slots over 300 keys all stay held past several TTLs',
    async () => {
      await unlessStalled(MAX_STALL_MS, async (round) => {
        const slots: HeldLease[] = [];
        const keyId = (key: number) => `key_${round}_${key}`;
        try {
          for (let key = 0; key < 300; key += 1) {
            for (let slot = 0; slot < 2; slot += 1) {
              const lease = await leases.acquire(keyId(key), 2);
              if (!lease) throw new Error(`${keyId(key)}: slot ${slot} refused`);
              slots.push(lease);
            }
          }
          await sleep(TTL_MS * 3);
          // Every key is still full: none of the 600 leases lapsed.
          const probes = await Promise.all([0, 149, 299].map((key) => leases.acquire(keyId(key), 2)));
          await Promise.all(probes.map((probe) => probe?.release()));
          expect(probes).toEqual([undefined, undefined, undefined]);
        } finally {
          await Promise.all(slots.map((lease) => lease.release()));
        }
        expect(await leases.acquire(keyId(0), 2)).toBeDefined();
      });
    },
    60_000,
  );

  run('a lease no one renews (its process died) lapses after the TTL', async () => {
    // Another process's leases on the same store.
    const other = newLeases();
    const held = await other.acquire('key_dead', 1);
    expect(held).toBeDefined();
    // The holder stops renewing without releasing, as a killed process would.
    await other.close().catch(() => undefined);
    expect(await leases.acquire('key_dead', 1)).toBeUndefined();
    await sleep(TTL_MS + 100);
    expect(await leases.acquire('key_dead', 1)).toBeDefined();
  });
});
