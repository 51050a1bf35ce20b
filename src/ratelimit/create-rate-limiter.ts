import type RedisClient from 'ioredis';
import type { GatewayConfig } from '../config/config';
import type { GatewayDatabase } from '../db/database';
import { MemoryRateLimiter } from './memory-rate-limiter';
import type { RateLimiter } from './rate-limiter';
import { RedisRateLimiter } from './redis-rate-limiter';
import { SqlRateLimiter } from './sql-rate-limiter';

/** The store chosen by RATE_LIMIT_STORE (default: redis with REDIS_URL, sql on PostgreSQL, else memory). */
export function createRateLimiter(config: GatewayConfig, database: GatewayDatabase): RateLimiter {
  switch (config.rateLimitStore) {
    case 'redis': {
      // Loaded only when used: ioredis adds ~15 MB of memory to a gateway without Redis.
      const Redis = require('ioredis') as typeof RedisClient;
      return new RedisRateLimiter(new Redis(config.redisUrl as string, { maxRetriesPerRequest: 2, enableOfflineQueue: true }), config.redisPrefix);
    }
    case 'sql':
      return new SqlRateLimiter(database.db, database.engine);
    case 'memory':
      return new MemoryRateLimiter();
  }
}
