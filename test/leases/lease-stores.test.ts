import Redis from 'ioredis';
import { type GatewayDatabase, openDatabase } from '../../src/db/database';
import { migrateToLatest } from '../../src/db/migrations';
import { RedisLeaseStore } from '../../src/leases/redis-lease-store';
import { SqlLeaseStore } from '../../src/leases/sql-lease-store';
import { leaseStoreContract } from '../helpers/lease-store-contract';
import { describeSkippedBecause } from '../helpers/skip-reasons';
import { createThrowawayDatabase, SQLITE_ONLY_REASON, sqliteOnly, testEngine } from '../helpers/test-database';
import { TEST_REDIS_URL, throwawayRedisPrefix } from '../helpers/test-redis';

/** The lease store's semantics (test/unit/memory-lease-store.test.ts) on the engines replicas share; two connections stand for two replicas. */
describe(`SQL lease store (${testEngine})`, () => {
  leaseStoreContract(async () => {
    const throwaway = await createThrowawayDatabase();
    // The contract is about exactness, not availability: on a loaded machine 60 acquisitions queued on
    // two pools of 10 wait longer for a connection than a gateway's deadlines allow (2 s, 6 s), and a
    // timeout there would say nothing about the store. Deadlines are tested in test/dependencies/.
    const patient = { connectTimeoutMs: 60_000, statementTimeoutMs: 60_000 };
    const databases: GatewayDatabase[] = [openDatabase(throwaway.url, patient), openDatabase(throwaway.url, patient)];
    await migrateToLatest(databases[0]!.db as never, databases[0]!.engine);
    const [a, b] = databases.map((d) => new SqlLeaseStore(d.db));
    return {
      a: a!,
      b: b!,
      concurrent: testEngine === 'postgres' ? [a!, b!] : [a!],
      cleanup: async () => {
        for (const d of databases) await d.close();
        await throwaway.drop();
      },
    };
  });
});

// Without Redis (npm run test:sqlite) it is left out.
(sqliteOnly ? describeSkippedBecause(SQLITE_ONLY_REASON) : describe)('Redis lease store', () => {
  leaseStoreContract(async () => {
    const prefix = throwawayRedisPrefix();
    const connections = [new Redis(TEST_REDIS_URL), new Redis(TEST_REDIS_URL)];
    const [a, b] = connections.map((connection) => new RedisLeaseStore(connection, prefix.prefix));
    return {
      a: a!,
      b: b!,
      concurrent: [a!, b!],
      cleanup: async () => {
        await Promise.all(connections.map((connection) => connection.quit()));
        await prefix.drop();
      },
    };
  });
});
