import type Redis from 'ioredis';
import type { Command, RedisOptions } from 'ioredis';
import type { GatewayConfig } from '../config/config';
import { DependencyUnavailableError, isRedisUnavailable } from '../errors/dependency-errors';
import type { DependencyHealth } from '../health/dependency-health';

/** The last connection error of each client, to say why it is not connected. */
const lastConnectionError = new WeakMap<Redis, unknown>();

/** Longest pause between reconnection attempts: Redis is back in use at most this long after it returns. */
const MAX_RECONNECT_DELAY_MS = 1000;

/**
 * A Redis client that fails fast instead of waiting out an outage: no offline queue (a command
 * sent while disconnected fails at once), no replays of commands cut by a disconnect, a timeout on
 * every command (timeCommandsOut) and on connecting. It keeps reconnecting in the background, so
 * traffic recovers by itself when Redis is back.
 */
export function createRedisClient(
  config: Pick<GatewayConfig, 'redisConnectTimeoutMs' | 'redisCommandTimeoutMs'> & { redisUrl: string },
  health: DependencyHealth | undefined,
): Redis {
  // Loaded only when used: ioredis adds ~15 MB of memory to a gateway without Redis.
  const RedisClient = require('ioredis') as typeof Redis;
  const options: RedisOptions = {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: config.redisConnectTimeoutMs,
    retryStrategy: (attempt) => Math.min(attempt * 100, MAX_RECONNECT_DELAY_MS),
  };
  const redis = new RedisClient(config.redisUrl, options);
  timeCommandsOut(redis, config.redisCommandTimeoutMs);
  // Connection errors arrive as events; without a listener ioredis prints each one.
  redis.on('error', (error: unknown) => {
    lastConnectionError.set(redis, error);
    health?.failed('redis', error);
  });
  return redis;
}

/**
 * Fails a command Redis has not answered within `ms`, judged after the process has read its
 * sockets: ioredis' own `commandTimeout` fires in the timers phase, before the poll phase that
 * would read an answer already waiting, so a process that was busy or descheduled for `ms` (a
 * long synchronous task, a loaded host) failed commands Redis had answered in time, as 503s.
 */
export function timeCommandsOut(redis: Redis, ms: number): void {
  const timed = new WeakSet<Command>();
  const send = redis.sendCommand.bind(redis);
  redis.sendCommand = (command, stream) => {
    if (!timed.has(command)) {
      timed.add(command);
      let immediate: NodeJS.Immediate | undefined;
      const timer = setTimeout(() => {
        // setImmediate runs after this loop iteration's poll phase: an answer in the socket is read first.
        immediate = setImmediate(() => {
          if (!command.isSettled) command.reject(new Error('Command timed out'));
        });
      }, ms);
      const done = () => {
        clearTimeout(timer);
        if (immediate) clearImmediate(immediate);
      };
      command.promise.then(done, done);
    }
    return send(command, stream);
  };
}

/** Resolves when Redis answers PING now; rejects at once while disconnected. */
export async function pingRedis(redis: Redis): Promise<void> {
  if (redis.status !== 'ready') {
    const cause = lastConnectionError.get(redis) as Error | undefined;
    throw new Error(`Redis connection is ${redis.status}${cause?.message ? ` (${cause.message})` : ''}`);
  }
  await redis.ping();
}

/**
 * One Redis call on the request path: a Redis that is down, hung or refusing becomes
 * DependencyUnavailableError (a 503), recorded in `health` for /readyz and the log.
 */
export async function callRedis<T>(health: DependencyHealth | undefined, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (!isRedisUnavailable(error)) throw error;
    throw health ? health.failed('redis', error) : new DependencyUnavailableError('redis', error);
  }
}

/** Closes a client: quit() needs a live connection; while Redis is down there is nothing to say goodbye to. */
export async function closeRedis(redis: Redis): Promise<void> {
  if (redis.status === 'ready') await redis.quit().catch(() => redis.disconnect());
  else redis.disconnect();
}

/** Waits (at most `ms`) for a connection under way to be ready or to fail: a normal start then logs no retry. */
export function connectionSettled(redis: Redis, ms: number): Promise<void> {
  if (redis.status !== 'connecting' && redis.status !== 'connect') return Promise.resolve();
  return new Promise<void>((resolve) => {
    const settled = () => {
      clearTimeout(timer);
      redis.off('ready', settled);
      redis.off('error', settled);
      resolve();
    };
    const timer = setTimeout(settled, ms);
    redis.once('ready', settled);
    redis.once('error', settled);
  });
}
