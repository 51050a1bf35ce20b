import { randomBytes } from 'node:crypto';
import type RedisClient from 'ioredis';
import { type Kysely, sql } from 'kysely';
import type { DatabaseEngine } from '../db/database';
import type { Database } from '../db/schema';
import { WINDOW_MS } from '../ratelimit/rate-limiter';

/** A channel's caps; null = none. */
export interface ChannelCaps {
  maxConcurrency: number | null;
  rpm: number | null;
  ipm: number | null;
  /** How long a slot stays taken if its holder never gives it back (a replica died). */
  leaseMs: number;
}

export type LimitRefusal = { refused: 'max_concurrency' | 'rpm' | 'ipm'; retryAfterMs: number };
export type Acquired = { leaseId: string };

export interface ChannelUsage {
  inFlight: number;
  calls: number;
  images: number;
}

/**
 * The shared state behind channel limits. `acquire` checks all three caps and, when they allow,
 * takes a slot (a lease that expires by itself) and counts the call and its images in one atomic
 * step, so the caps hold across replicas; `release` gives the slot back.
 */
export interface ChannelLimitStore {
  acquire(channelId: string, caps: ChannelCaps, images: number, now: number): Promise<Acquired | LimitRefusal>;
  release(channelId: string, leaseId: string): Promise<void>;
  usage(channelId: string, now: number): Promise<ChannelUsage>;
  close(): Promise<void>;
}

const newLeaseId = () => randomBytes(9).toString('base64url');

/** In-process, for environment channels (their cap is per process, as before channels existed). */
export class MemoryLimitStore implements ChannelLimitStore {
  private readonly leases = new Map<string, Map<string, number>>();
  private readonly calls = new Map<string, Array<{ at: number; images: number }>>();

  private live(channelId: string, now: number) {
    const leases = this.leases.get(channelId) ?? new Map<string, number>();
    for (const [id, expiresAt] of leases) if (expiresAt <= now) leases.delete(id);
    this.leases.set(channelId, leases);
    const calls = (this.calls.get(channelId) ?? []).filter((c) => c.at > now - WINDOW_MS);
    this.calls.set(channelId, calls);
    return { leases, calls };
  }

  async acquire(channelId: string, caps: ChannelCaps, images: number, now: number): Promise<Acquired | LimitRefusal> {
    const { leases, calls } = this.live(channelId, now);
    if (caps.maxConcurrency !== null && leases.size >= caps.maxConcurrency) {
      return { refused: 'max_concurrency', retryAfterMs: Math.max(0, Math.min(...leases.values()) - now) };
    }
    if (caps.rpm !== null && calls.length >= caps.rpm) return { refused: 'rpm', retryAfterMs: calls[calls.length - caps.rpm]!.at + WINDOW_MS - now };
    const used = calls.reduce((sum, c) => sum + c.images, 0);
    if (caps.ipm !== null && used + images > caps.ipm) return { refused: 'ipm', retryAfterMs: (calls[0]?.at ?? now) + WINDOW_MS - now };
    const leaseId = newLeaseId();
    leases.set(leaseId, now + caps.leaseMs);
    if (caps.rpm !== null || caps.ipm !== null) calls.push({ at: now, images });
    return { leaseId };
  }

  async release(channelId: string, leaseId: string): Promise<void> {
    this.leases.get(channelId)?.delete(leaseId);
  }

  async usage(channelId: string, now: number): Promise<ChannelUsage> {
    const { leases, calls } = this.live(channelId, now);
    return { inFlight: leases.size, calls: calls.length, images: calls.reduce((sum, c) => sum + c.images, 0) };
  }

  async close(): Promise<void> {}
}

/**
 * Leases in a sorted set scored by expiry; calls and images in sorted sets scored by time (one
 * member per image). Returns {1, lease} or {0, which cap, ms until it frees}.
 */
const ACQUIRE = `
local leases, calls, images = KEYS[1], KEYS[2], KEYS[3]
local now, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local maxc, rpm, ipm, n = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
redis.call('ZREMRANGEBYSCORE', leases, '-inf', now)
redis.call('ZREMRANGEBYSCORE', calls, '-inf', now - window)
redis.call('ZREMRANGEBYSCORE', images, '-inf', now - window)
if maxc >= 0 and redis.call('ZCARD', leases) >= maxc then
  local first = redis.call('ZRANGE', leases, 0, 0, 'WITHSCORES')
  return {0, 1, tonumber(first[2]) - now}
end
local callCount = redis.call('ZCARD', calls)
if rpm >= 0 and callCount >= rpm then
  local frees = redis.call('ZRANGE', calls, callCount - rpm, callCount - rpm, 'WITHSCORES')
  return {0, 2, tonumber(frees[2]) + window - now}
end
local imageCount = redis.call('ZCARD', images)
if ipm >= 0 and imageCount + n > ipm then
  local index = math.max(0, imageCount + n - ipm - 1)
  local frees = redis.call('ZRANGE', images, index, index, 'WITHSCORES')
  local at = now
  if frees[2] then at = tonumber(frees[2]) end
  return {0, 3, at + window - now}
end
redis.call('ZADD', leases, ARGV[8], ARGV[7])
redis.call('PEXPIRE', leases, math.max(tonumber(ARGV[8]) - now, 1) + window)
redis.call('ZADD', calls, now, ARGV[7])
redis.call('PEXPIRE', calls, window * 2)
for i = 1, n do redis.call('ZADD', images, now, ARGV[7] .. ':' .. i) end
redis.call('PEXPIRE', images, window * 2)
return {1}
`;

const REFUSALS = ['max_concurrency', 'max_concurrency', 'rpm', 'ipm'] as const;

export class RedisLimitStore implements ChannelLimitStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {
    this.redis.defineCommand('cgwChannelAcquire', { numberOfKeys: 3, lua: ACQUIRE });
  }

  private keys(channelId: string): [string, string, string] {
    const base = `${this.prefix}chn:{${channelId}}:`;
    return [`${base}leases`, `${base}calls`, `${base}images`];
  }

  async acquire(channelId: string, caps: ChannelCaps, images: number, now: number): Promise<Acquired | LimitRefusal> {
    const leaseId = newLeaseId();
    const redis = this.redis as unknown as { cgwChannelAcquire: (...args: unknown[]) => Promise<number[]> };
    const [ok, which, retryAfterMs] = (await redis.cgwChannelAcquire(
      ...this.keys(channelId),
      now,
      WINDOW_MS,
      caps.maxConcurrency ?? -1,
      caps.rpm ?? -1,
      caps.ipm ?? -1,
      images,
      leaseId,
      now + caps.leaseMs,
    )) as [number, number?, number?];
    if (ok === 1) return { leaseId };
    return { refused: REFUSALS[which ?? 1]!, retryAfterMs: Math.max(0, retryAfterMs ?? 0) };
  }

  async release(channelId: string, leaseId: string): Promise<void> {
    await this.redis.zrem(this.keys(channelId)[0], leaseId);
  }

  async usage(channelId: string, now: number): Promise<ChannelUsage> {
    const [leases, calls, images] = this.keys(channelId);
    const results = await this.redis
      .multi()
      .zcount(leases, `(${now}`, '+inf')
      .zcount(calls, `(${now - WINDOW_MS}`, '+inf')
      .zcount(images, `(${now - WINDOW_MS}`, '+inf')
      .exec();
    const [inFlight, callCount, imageCount] = (results ?? []).map(([, value]) => Number(value ?? 0));
    return { inFlight: inFlight ?? 0, calls: callCount ?? 0, images: imageCount ?? 0 };
  }

  async close(): Promise<void> {
    await this.redis.quit();
  }
}

/**
 * Leases and calls in the database (channel_leases, channel_calls), for replicas without Redis.
 * Serialised per channel: a PostgreSQL advisory lock; on SQLite the transaction's first statement
 * is a write, which takes the database's write lock until commit.
 */
export class SqlLimitStore implements ChannelLimitStore {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly engine: DatabaseEngine,
  ) {}

  async acquire(channelId: string, caps: ChannelCaps, images: number, now: number): Promise<Acquired | LimitRefusal> {
    return this.db.transaction().execute(async (trx) => {
      if (this.engine === 'postgres') await sql`SELECT pg_advisory_xact_lock(hashtext(${`chn:${channelId}`}))`.execute(trx);
      await trx.deleteFrom('channel_leases').where('channel_id', '=', channelId).where('expires_at', '<=', now).execute();
      await trx.deleteFrom('channel_calls').where('channel_id', '=', channelId).where('at', '<=', now - WINDOW_MS).execute();
      const state = await sql<{ in_flight: number; next_expiry: number | null; calls: number; images: number; oldest_call: number | null }>`
        SELECT
          (SELECT count(*) FROM channel_leases WHERE channel_id = ${channelId}) AS in_flight,
          (SELECT min(expires_at) FROM channel_leases WHERE channel_id = ${channelId}) AS next_expiry,
          (SELECT count(*) FROM channel_calls WHERE channel_id = ${channelId}) AS calls,
          (SELECT coalesce(sum(images), 0) FROM channel_calls WHERE channel_id = ${channelId}) AS images,
          (SELECT min(at) FROM channel_calls WHERE channel_id = ${channelId}) AS oldest_call`.execute(trx);
      const row = state.rows[0]!;
      const untilOldestLeaves = Math.max(0, Number(row.oldest_call ?? now) + WINDOW_MS - now);
      if (caps.maxConcurrency !== null && Number(row.in_flight) >= caps.maxConcurrency) {
        return { refused: 'max_concurrency' as const, retryAfterMs: Math.max(0, Number(row.next_expiry ?? now) - now) };
      }
      if (caps.rpm !== null && Number(row.calls) >= caps.rpm) return { refused: 'rpm' as const, retryAfterMs: untilOldestLeaves };
      if (caps.ipm !== null && Number(row.images) + images > caps.ipm) return { refused: 'ipm' as const, retryAfterMs: untilOldestLeaves };
      const leaseId = newLeaseId();
      await trx.insertInto('channel_leases').values({ lease_id: leaseId, channel_id: channelId, expires_at: now + caps.leaseMs }).execute();
      await trx.insertInto('channel_calls').values({ channel_id: channelId, at: now, images }).execute();
      return { leaseId };
    });
  }

  async release(_channelId: string, leaseId: string): Promise<void> {
    await this.db.deleteFrom('channel_leases').where('lease_id', '=', leaseId).execute();
  }

  async usage(channelId: string, now: number): Promise<ChannelUsage> {
    const state = await sql<{ in_flight: number; calls: number; images: number }>`
      SELECT
        (SELECT count(*) FROM channel_leases WHERE channel_id = ${channelId} AND expires_at > ${now}) AS in_flight,
        (SELECT count(*) FROM channel_calls WHERE channel_id = ${channelId} AND at > ${now - WINDOW_MS}) AS calls,
        (SELECT coalesce(sum(images), 0) FROM channel_calls WHERE channel_id = ${channelId} AND at > ${now - WINDOW_MS}) AS images`.execute(this.db);
    const row = state.rows[0]!;
    return { inFlight: Number(row.in_flight), calls: Number(row.calls), images: Number(row.images) };
  }

  async close(): Promise<void> {}
}

/** Redis when REDIS_URL is set, the database otherwise. */
export function createChannelLimitStore(redisUrl: string | undefined, prefix: string, db: Kysely<Database>, engine: DatabaseEngine): ChannelLimitStore {
  if (redisUrl) {
    // Loaded only when used, as for the key rate limiter.
    const Redis = require('ioredis') as typeof RedisClient;
    return new RedisLimitStore(new Redis(redisUrl, { maxRetriesPerRequest: 2, enableOfflineQueue: true }), prefix);
  }
  return new SqlLimitStore(db, engine);
}
