import type Redis from 'ioredis';
import type { Logger } from 'pino';
import type { GatewayConfig } from '../config/config';
import type { GatewayDatabase } from '../db/database';
import type { DependencyHealth } from '../health/dependency-health';
import { MemoryLeaseStore } from '../leases/memory-lease-store';
import { RedisLeaseStore } from '../leases/redis-lease-store';
import { SqlLeaseStore } from '../leases/sql-lease-store';
import { FallbackRateLimiter } from './fallback-rate-limiter';
import { LeaseRateLimiter } from './lease-rate-limiter';
import type { RateLimiter } from './rate-limiter';

/** The store chosen by RATE_LIMIT_STORE (default: redis with REDIS_URL, sql on PostgreSQL, else memory). */
export function createRateLimiter(
  config: GatewayConfig,
  database: GatewayDatabase,
  options: { redis: Redis | undefined; health?: DependencyHealth; logger: Logger },
): RateLimiter {
  const onSql = () => new LeaseRateLimiter(new SqlLeaseStore(database.db));
  switch (config.rateLimitStore) {
    case 'redis': {
      // Config refuses RATE_LIMIT_STORE=redis without REDIS_URL, and the gateway opens a client whenever it is set.
      if (!options.redis) throw new Error('RATE_LIMIT_STORE=redis without a Redis client');
      const onRedis = new LeaseRateLimiter(new RedisLeaseStore(options.redis, config.redisPrefix, options.health));
      if (config.rateLimitRedisFallback === 'refuse') return onRedis;
      return new FallbackRateLimiter(onRedis, onSql(), options.logger);
    }
    case 'sql':
      return onSql();
    case 'memory':
      return new LeaseRateLimiter(new MemoryLeaseStore());
  }
}
