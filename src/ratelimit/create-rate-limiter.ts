import type Redis from 'ioredis';
import type { Logger } from 'pino';
import type { GatewayConfig } from '../config/config';
import type { GatewayDatabase } from '../db/database';
import type { DependencyHealth } from '../health/dependency-health';
import { FallbackRateLimiter } from './fallback-rate-limiter';
import { MemoryRateLimiter } from './memory-rate-limiter';
import type { RateLimiter } from './rate-limiter';
import { RedisRateLimiter } from './redis-rate-limiter';
import { SqlRateLimiter } from './sql-rate-limiter';

/** The store chosen by RATE_LIMIT_STORE (default: redis with REDIS_URL, sql on PostgreSQL, else memory). */
export function createRateLimiter(
  config: GatewayConfig,
  database: GatewayDatabase,
  options: { redis: Redis | undefined; health?: DependencyHealth; logger: Logger },
): RateLimiter {
  switch (config.rateLimitStore) {
    case 'redis': {
      // Config refuses RATE_LIMIT_STORE=redis without REDIS_URL, and the gateway opens a client whenever it is set.
      if (!options.redis) throw new Error('RATE_LIMIT_STORE=redis without a Redis client');
      const onRedis = new RedisRateLimiter(options.redis, config.redisPrefix, options.health);
      if (config.rateLimitRedisFallback === 'refuse') return onRedis;
      return new FallbackRateLimiter(onRedis, new SqlRateLimiter(database.db, database.engine), options.logger);
    }
    case 'sql':
      return new SqlRateLimiter(database.db, database.engine);
    case 'memory':
      return new MemoryRateLimiter();
  }
}
