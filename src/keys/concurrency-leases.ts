import type RedisClient from 'ioredis';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Database } from '../db/schema';
import type { DependencyHealth } from '../health/dependency-health';
import type { LeaseRef, LeaseStore } from '../leases/lease-store';
import { sharedLeaseStore } from '../leases/shared-lease-store';
import type { Clock } from '../shared/clock';
import { randomBase62 } from '../shared/ids';
import { RenewedSet } from '../shared/renewed-set';

/**
 * A key's `max_concurrent`: one lease per generation in flight, shared by every replica (Redis when
 * REDIS_URL is set, else the database). A lease expires `ttlMs` after its last renewal; the process
 * holding it renews it every third of that while the generation runs (all its leases at once, from
 * one timer), so a replica that dies (SIGKILL, power loss) frees its slots within `ttlMs`.
 */
export interface ConcurrencyLeases {
  /** Takes one of the key's `max` slots, or answers undefined when all are taken. */
  acquire(keyId: string, max: number): Promise<HeldLease | undefined>;
  close(): Promise<void>;
}

export interface HeldLease {
  release(): Promise<void>;
}

class RenewedLeases implements ConcurrencyLeases {
  /** The leases this process holds (lease id -> its ref): one timer, one statement or pipeline per 500. */
  private readonly held: RenewedSet<string, LeaseRef>;

  constructor(
    private readonly store: LeaseStore,
    private readonly clock: Clock,
    private readonly ttlMs: number,
    private readonly logger: Logger,
  ) {
    this.held = new RenewedSet(
      Math.floor(ttlMs / 3),
      (batch) => {
        const now = clock.now();
        return store.renew(
          batch.map(([, ref]) => ref),
          now + ttlMs,
          now,
        );
      },
      (error, leases) => logger.warn({ err: error, leases }, 'could not renew concurrency leases'),
    );
  }

  async acquire(keyId: string, max: number): Promise<HeldLease | undefined> {
    const now = this.clock.now();
    const scope = { owner: `key:${keyId}`, name: 'concurrency' };
    const taken = await this.store.acquire([{ scope, limit: max, units: 1, expiresAt: now + this.ttlMs }], now, `lease_${randomBase62(22)}`);
    if (!taken.granted) return undefined;
    const ref: LeaseRef = { scope, leaseId: taken.leaseId, units: 1 };
    this.held.add(ref.leaseId, ref);
    let released = false;
    return {
      release: async () => {
        if (released) return;
        released = true;
        this.held.delete(ref.leaseId);
        try {
          await this.store.release([ref]);
        } catch (error) {
          // The lease then lapses by itself within ttlMs.
          this.logger.warn({ err: error, key_id: keyId }, 'could not release a concurrency lease');
        }
      },
    };
  }

  close(): Promise<void> {
    this.held.stop();
    return this.store.close();
  }
}

export interface ConcurrencyLeaseOptions {
  db: Kysely<Database>;
  /** The gateway's Redis connection (REDIS_URL), undefined without Redis. */
  redis: RedisClient | undefined;
  redisPrefix: string;
  health?: DependencyHealth;
  clock: Clock;
  ttlMs: number;
  logger: Logger;
}

/** Redis when the gateway has a Redis connection (REDIS_URL), else the database. */
export function createConcurrencyLeases(options: ConcurrencyLeaseOptions): ConcurrencyLeases {
  const store = sharedLeaseStore(options.redis, options.redisPrefix, options.health, options.db);
  return new RenewedLeases(store, options.clock, options.ttlMs, options.logger);
}
