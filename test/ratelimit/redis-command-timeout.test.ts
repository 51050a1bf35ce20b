import Redis from 'ioredis';
import { closeRedis, connectionSettled, createRedisClient } from '../../src/ratelimit/redis-client';
import { TEST_REDIS_URL } from '../helpers/test-redis';
import { ThrowawayRedis } from '../helpers/throwaway-servers';

const TIMEOUT_MS = 100;

/** Keeps the event loop busy, as a long synchronous task or a descheduled process does. */
function busyFor(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    // spin
  }
}

/** Sends PING, then keeps the process busy past the command timeout while Redis answers. */
async function pingThroughAStall(redis: Redis): Promise<string> {
  await connectionSettled(redis, 2000);
  await redis.ping();
  const answer = redis.ping();
  busyFor(TIMEOUT_MS * 4);
  return answer;
}

describe('Redis command timeout', () => {
  it('a command Redis answered in time is not failed because the process was busy when the timeout came', async () => {
    const redis = createRedisClient({ redisUrl: TEST_REDIS_URL, redisCommandTimeoutMs: TIMEOUT_MS, redisConnectTimeoutMs: 1000 }, undefined);
    try {
      await expect(pingThroughAStall(redis)).resolves.toBe('PONG');
    } finally {
      await closeRedis(redis);
    }
  });

  it('the same stall fails the command with ioredis commandTimeout alone (what the test above guards against)', async () => {
    const redis = new Redis(TEST_REDIS_URL, { commandTimeout: TIMEOUT_MS, maxRetriesPerRequest: 0 });
    try {
      await expect(pingThroughAStall(redis)).rejects.toThrow('Command timed out');
    } finally {
      redis.disconnect();
    }
  });

  it('a Redis that answers nothing still fails the command after the timeout', async () => {
    const server = await ThrowawayRedis.start();
    const redis = createRedisClient({ redisUrl: server.url, redisCommandTimeoutMs: TIMEOUT_MS, redisConnectTimeoutMs: 1000 }, undefined);
    try {
      await connectionSettled(redis, 2000);
      await redis.ping();
      server.freeze();
      const started = Date.now();
      await expect(redis.ping()).rejects.toThrow('Command timed out');
      expect(Date.now() - started).toBeLessThan(TIMEOUT_MS * 20);
    } finally {
      server.thaw();
      redis.disconnect();
      await server.kill();
    }
  });
});
