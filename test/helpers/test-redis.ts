import Redis from 'ioredis';
import { randomBase62 } from '../../src/shared/ids';

export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A key prefix of its own for one test, and a cleanup that deletes everything under it. */
export function throwawayRedisPrefix(): { prefix: string; drop(): Promise<void> } {
  const prefix = `cgw-test:${randomBase62(8)}:`;
  return {
    prefix,
    async drop() {
      const redis = new Redis(TEST_REDIS_URL);
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
        if (keys.length > 0) await redis.del(...keys);
        cursor = next;
      } while (cursor !== '0');
      await redis.quit();
    },
  };
}
