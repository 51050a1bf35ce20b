import type Redis from 'ioredis';
import type { Logger } from 'pino';
import type { GatewayConfig } from '../config/config';
import type { GatewayDatabase } from '../db/database';
import type { DependencyHealth } from '../health/dependency-health';
import { FallbackRateLimiter } from './fallback-rate-limiter';
import { MemoryRateLimiter } from './memory-rate-limiter';
import type { RateLimiter } from './rate-limiter';
import { createRedisClient } from './redis-client';
import { RedisRateLimiter } from './redis-rate-limiter';
import { SqlRateLimiter } from './sql-rate-limiter';

export interface CreatedRateLimiter {
  limiter: RateLimiter;
  /** The Redis connection when the store is Redis, for startup and readiness checks. */
  redis: Redis | undefined;
}

/** The store chosen by RATE_LIMIT_STORE (default: redis with REDIS_URL, sql on PostgreSQL, else memory). */
export function createRateLimiter(
  config: GatewayConfig,
  database: GatewayDatabase,
  options: { health?: DependencyHealth; logger: Logger },
): CreatedRateLimiter {
  switch (config.rateLimitStore) {
    case 'redis': {
      const redis = createRedisClient({ ...config, redisUrl: config.redisUrl as string }, options.health);
      const onRedis = new RedisRateLimiter(redis, config.redisPrefix, options.health);
      if (config.rateLimitRedisFallback === 'refuse') return { limiter: onRedis, redis };
      return { limiter: new FallbackRateLimiter(onRedis, new SqlRateLimiter(database.db, database.engine), options.logger), redis };
    }
    case 'sql':
      return { limiter: new SqlRateLimiter(database.db, database.engine), redis: undefined };
    case 'memory':
      return { limiter: new MemoryRateLimiter(), redis: undefined };
  }
}
