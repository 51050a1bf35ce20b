import Redis from 'ioredis';
import { type ChannelCaps, ChannelLimits, type ChannelLimitStore } from '../../src/channels/channel-limits';
import { type GatewayDatabase, openDatabase } from '../../src/db/database';
import { migrateToLatest } from '../../src/db/migrations';
import { MemoryLeaseStore } from '../../src/leases/memory-lease-store';
import { RedisLeaseStore } from '../../src/leases/redis-lease-store';
import { SqlLeaseStore } from '../../src/leases/sql-lease-store';
import { createThrowawayDatabase, sqliteOnly, testEngine } from '../helpers/test-database';
import { TEST_REDIS_URL, throwawayRedisPrefix } from '../helpers/test-redis';

/**
 * Two handles on one store stand for two replicas: what one writes (a cool-down, the probe lease)
 * the other must see. Memory is per process (environment channels), so its "replicas" share one object.
 */
type Stores = { a: ChannelLimitStore; b: ChannelLimitStore; cleanup(): Promise<void> };

const CHANNELS = ['chn_sharedStateA', 'chn_sharedStateB'];

const stores: Array<[string, () => Promise<Stores>]> = [
  [
    'memory',
    async () => {
      const store = new ChannelLimits(new MemoryLeaseStore());
      return { a: store, b: store, cleanup: async () => undefined };
    },
  ],
  [
    `sql (${testEngine})`,
    async () => {
      const throwaway = await createThrowawayDatabase();
      const databases: GatewayDatabase[] = [openDatabase(throwaway.url), openDatabase(throwaway.url)];
      await migrateToLatest(databases[0]!.db as never, databases[0]!.engine);
      const [a, b] = databases.map((d) => new ChannelLimits(new SqlLeaseStore(d.db)));
      return {
        a: a!,
        b: b!,
        cleanup: async () => {
          for (const d of databases) await d.close();
          await throwaway.drop();
        },
      };
    },
  ],
  [
    'redis',
    async () => {
      const prefix = throwawayRedisPrefix();
      const connections = [0, 1].map(() => new Redis(TEST_REDIS_URL));
      const [a, b] = connections.map((connection) => new ChannelLimits(new RedisLeaseStore(connection, prefix.prefix)));
      return {
        a: a!,
        b: b!,
        cleanup: async () => {
          await a!.close();
          await b!.close();
          await Promise.all(connections.map((connection) => connection.quit()));
          await prefix.drop();
        },
      };
    },
  ],
];

const UNCAPPED: ChannelCaps = { maxConcurrency: null, rpm: null, ipm: null, leaseMs: 3000 };
const CAPPED: ChannelCaps = { maxConcurrency: 5, rpm: 100, ipm: 100, leaseMs: 3000 };

// Without Redis (npm run test:sqlite) its store is left out.
describe.each(stores.filter(([name]) => !(sqliteOnly && name === 'redis')))('channel shared state: %s', (name, open) => {
  let s: Stores;
  beforeEach(async () => {
    s = await open();
  });
  afterEach(() => s.cleanup());

  it('a cool-down set by one replica refuses the channel on the other, capped or not; a shorter one never shortens it', async () => {
    const [id, other] = CHANNELS as [string, string];
    const now = Date.now();
    expect(await s.b.acquire(id, UNCAPPED, 1, now)).toEqual({ leaseId: undefined });
    await s.a.coolDown(id, now + 30_000, now);
    await s.a.coolDown(id, now + 5_000, now);
    for (const caps of [UNCAPPED, CAPPED]) {
      const refused = await s.b.acquire(id, caps, 1, Date.now());
      expect(refused).toMatchObject({ refused: 'cooling_down' });
      expect('retryAfterMs' in refused && refused.retryAfterMs).toBeGreaterThan(25_000);
    }
    const usage = await s.b.usage(id, Date.now());
    expect(usage.coolingUntil).toBeGreaterThan(now + 25_000);
    // A cool-down is one channel's: the other is served, and counted, as before.
    expect(await s.b.acquire(other, CAPPED, 1, Date.now())).toEqual({ leaseId: expect.any(String) });
    expect(await s.b.usage(other, Date.now())).toMatchObject({ inFlight: 1, calls: 1, images: 1, coolingUntil: null });
  });

  it('the probe lease: one holder at a time; only the holder moves its end; an ended lease is free', async () => {
    const now = Date.now();
    expect(await s.a.takeLease('channel-probe', 'replica-a', now + 60_000, now)).toBe(true);
    expect(await s.b.takeLease('channel-probe', 'replica-b', now + 60_000, now)).toBe(false);
    await s.b.endLeaseAt('channel-probe', 'replica-b', now - 1, now);
    expect(await s.b.takeLease('channel-probe', 'replica-b', now + 60_000, Date.now())).toBe(false);
    await s.a.endLeaseAt('channel-probe', 'replica-a', now - 1, Date.now());
    expect(await s.b.takeLease('channel-probe', 'replica-b', now + 60_000, Date.now())).toBe(true);
    expect(await s.a.takeLease('channel-probe', 'replica-a', now + 60_000, Date.now())).toBe(false);
    // Other names are other leases.
    expect(await s.a.takeLease('another-lease', 'replica-a', now + 60_000, Date.now())).toBe(true);
  });

  if (name !== 'redis') {
    // Redis expires keys on its own clock; the others compare with the `now` they are given.
    it('a lease whose holder died is taken over once it has expired', async () => {
      const now = Date.now();
      expect(await s.a.takeLease('channel-probe', 'replica-a', now + 1000, now)).toBe(true);
      expect(await s.b.takeLease('channel-probe', 'replica-b', now + 60_000, now + 999)).toBe(false);
      expect(await s.b.takeLease('channel-probe', 'replica-b', now + 60_000, now + 1000)).toBe(true);
    });
  }
});
