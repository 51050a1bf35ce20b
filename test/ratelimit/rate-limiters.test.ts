import Redis from 'ioredis';
import { type GatewayDatabase, openDatabase } from '../../src/db/database';
import { migrateToLatest } from '../../src/db/migrations';
import { MemoryLeaseStore } from '../../src/leases/memory-lease-store';
import { RedisLeaseStore } from '../../src/leases/redis-lease-store';
import { SqlLeaseStore } from '../../src/leases/sql-lease-store';
import { LeaseRateLimiter } from '../../src/ratelimit/lease-rate-limiter';
import type { RateLimiter } from '../../src/ratelimit/rate-limiter';
import { createThrowawayDatabase, sqliteOnly, testEngine, type ThrowawayDatabase } from '../helpers/test-database';
import { TEST_REDIS_URL, throwawayRedisPrefix } from '../helpers/test-redis';

/** The same exactness checks for every store: in memory, SQL on this project's engine, Redis. */
type Store = { limiter: RateLimiter; cleanup(): Promise<void> };

const stores: Array<[string, () => Promise<Store>]> = [
  ['memory', async () => ({ limiter: new LeaseRateLimiter(new MemoryLeaseStore()), cleanup: async () => undefined })],
  [
    `sql (${testEngine})`,
    async () => {
      const throwaway: ThrowawayDatabase = await createThrowawayDatabase();
      // Exactness, not availability: 60 concurrent checks queued on a pool of 10 wait longer for a
      // connection on a loaded machine than a gateway's deadlines (2 s, 6 s) allow; test/dependencies/ tests those.
      const database: GatewayDatabase = openDatabase(throwaway.url, { connectTimeoutMs: 60_000, statementTimeoutMs: 60_000 });
      await migrateToLatest(database.db as never, database.engine);
      return {
        limiter: new LeaseRateLimiter(new SqlLeaseStore(database.db)),
        cleanup: async () => {
          await database.close();
          await throwaway.drop();
        },
      };
    },
  ],
  [
    'redis',
    async () => {
      const prefix = throwawayRedisPrefix();
      const connection = new Redis(TEST_REDIS_URL);
      const limiter = new LeaseRateLimiter(new RedisLeaseStore(connection, prefix.prefix));
      return {
        limiter,
        cleanup: async () => {
          await limiter.close();
          await connection.quit();
          await prefix.drop();
        },
      };
    },
  ],
];

// Without Redis (npm run test:sqlite) its store is left out.
describe.each(stores.filter(([name]) => !(sqliteOnly && name === 'redis')))('rate limiter: %s', (_name, open) => {
  let store: Store;
  beforeEach(async () => {
    store = await open();
  });
  afterEach(() => store.cleanup());

  it('allows exactly `limit` in any rolling minute; slots free as requests age out', async () => {
    const { limiter } = store;
    const t0 = 1_700_000_000_000;
    for (let i = 0; i < 3; i += 1) expect((await limiter.consume('k', 3, t0 + i * 10_000)).allowed).toBe(true);
    expect(await limiter.consume('k', 3, t0 + 30_000)).toMatchObject({ allowed: false, remaining: 0, resetSeconds: 30 });
    expect((await limiter.consume('k', 3, t0 + 59_999)).allowed).toBe(false);
    expect((await limiter.consume('k', 3, t0 + 60_000)).allowed).toBe(true);
    expect((await limiter.consume('k', 3, t0 + 60_001)).allowed).toBe(false);
    expect(await limiter.peek('k', 3, t0 + 60_001)).toMatchObject({ remaining: 0, resetSeconds: 10 });
  });

  it('peek counts nothing and keys are independent', async () => {
    const { limiter } = store;
    expect(await limiter.peek('a', 2, 5_000)).toMatchObject({ allowed: true, remaining: 2, resetSeconds: 0 });
    expect(await limiter.consume('a', 2, 5_000)).toMatchObject({ allowed: true, remaining: 1, resetSeconds: 60 });
    expect(await limiter.peek('a', 2, 6_000)).toMatchObject({ remaining: 1, resetSeconds: 59 });
    expect((await limiter.consume('b', 1, 6_000)).allowed).toBe(true);
    expect((await limiter.consume('b', 1, 6_000)).allowed).toBe(false);
  });

  it('is exact under 60 concurrent checks', async () => {
    const results = await Promise.all(Array.from({ length: 60 }, () => store.limiter.consume('burst', 20, 9_000_000)));
    expect(results.filter((r) => r.allowed)).toHaveLength(20);
  });
});
