import type RedisClient from 'ioredis';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema';
import type { DependencyHealth } from '../health/dependency-health';
import type { LeaseStore } from './lease-store';
import { RedisLeaseStore } from './redis-lease-store';
import { SqlLeaseStore } from './sql-lease-store';

/** The store every replica shares: Redis when the gateway has a Redis connection (REDIS_URL), the database otherwise. */
export function sharedLeaseStore(redis: RedisClient | undefined, prefix: string, health: DependencyHealth | undefined, db: Kysely<Database>): LeaseStore {
  return redis ? new RedisLeaseStore(redis, prefix, health) : new SqlLeaseStore(db);
}
