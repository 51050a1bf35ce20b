import type Redis from 'ioredis';
import type { DependencyHealth } from '../health/dependency-health';
import { randomBase62 } from '../shared/ids';
import { type RateLimitDecision, type RateLimiter, WINDOW_MS, decisionFromWindow } from './rate-limiter';
import { callRedis } from './redis-client';

/**
 * Sliding-window log in a Redis sorted set per key, checked and updated by one Lua script,
 * so the limit is exact across any number of gateway replicas.
 * Returns {allowed, count, score of the request whose expiry frees the next slot or -1}.
 */
const SCRIPT = `
local key = KEYS[1]
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local consume = ARGV[4] == '1'
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local count = redis.call('ZCARD', key)
local allowed = 0
if consume and count < limit then
  redis.call('ZADD', key, now, ARGV[5])
  redis.call('PEXPIRE', key, window)
  count = count + 1
  allowed = 1
end
local index = 0
if count >= limit then index = count - limit end
local entry = redis.call('ZRANGE', key, index, index, 'WITHSCORES')
local frees = -1
if entry[2] then frees = tonumber(entry[2]) end
return {allowed, count, frees}
`;

export class RedisRateLimiter implements RateLimiter {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly health?: DependencyHealth,
  ) {
    this.redis.defineCommand('cgwSlidingWindow', { numberOfKeys: 1, lua: SCRIPT });
  }

  /** Fails with DependencyUnavailableError (a 503) when Redis is down, hung or refusing. */
  private async script(keyId: string, limit: number, now: number, consume: boolean): Promise<[number, number, number]> {
    const member = `${now}-${randomBase62(8)}`;
    const redis = this.redis as unknown as { cgwSlidingWindow: (...args: unknown[]) => Promise<number[]> };
    return callRedis(
      this.health,
      async () => (await redis.cgwSlidingWindow(`${this.prefix}rl:${keyId}`, now, WINDOW_MS, limit, consume ? '1' : '0', member)) as [number, number, number],
    );
  }

  private async run(keyId: string, limit: number, now: number, consume: boolean): Promise<RateLimitDecision> {
    const [allowed, count, frees] = await this.script(keyId, limit, now, consume);
    return decisionFromWindow(limit, count, frees < 0 ? undefined : frees, now, consume ? allowed === 1 : true);
  }

  consume(keyId: string, limit: number, now: number): Promise<RateLimitDecision> {
    return this.run(keyId, limit, now, true);
  }

  peek(keyId: string, limit: number, now: number): Promise<RateLimitDecision> {
    return this.run(keyId, limit, now, false);
  }

  /** The connection is the gateway's, shared with other stores: startGateway closes it. */
  async close(): Promise<void> {}
}
