import Redis from 'ioredis';
import { isRedisUnavailable } from '../../src/errors/dependency-errors';
import { freePort } from '../helpers/throwaway-servers';

/** Which errors of a Redis call are an outage (503, /readyz) and which are bugs (500). */
describe('isRedisUnavailable', () => {
  it('is true for what ioredis throws when nothing listens, with no offline queue', async () => {
    const redis = new Redis(`redis://127.0.0.1:${await freePort()}`, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      lazyConnect: true,
      retryStrategy: () => null,
    });
    redis.on('error', () => undefined);
    const error = await redis.get('k').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    expect(isRedisUnavailable(error)).toBe(true);
    redis.disconnect();
  });

  it('is true for replies that say the server cannot serve now, false for other replies', () => {
    const reply = (message: string) => Object.assign(new Error(message), { name: 'ReplyError' });
    expect(isRedisUnavailable(reply('LOADING Redis is loading the dataset in memory'))).toBe(true);
    expect(isRedisUnavailable(reply('READONLY You can\u2019t write against a read only replica.'))).toBe(true);
    expect(isRedisUnavailable(reply('ERR Error running script: attempt to compare nil with number'))).toBe(false);
  });

  it('is false for bugs of our own', () => {
    expect(isRedisUnavailable(new TypeError("Cannot read properties of undefined (reading 'length')"))).toBe(false);
    expect(isRedisUnavailable(new RangeError('Invalid array length'))).toBe(false);
    expect(isRedisUnavailable(undefined)).toBe(false);
  });
});
