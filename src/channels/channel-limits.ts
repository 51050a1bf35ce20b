import type RedisClient from 'ioredis';
import { type Kysely, sql } from 'kysely';
import type { DatabaseEngine } from '../db/database';
import type { Database } from '../db/schema';
import type { DependencyHealth } from '../health/dependency-health';
import { callRedis } from '../ratelimit/redis-client';
import { WINDOW_MS } from '../ratelimit/rate-limiter';
import { randomBase62 } from '../shared/ids';

/** A channel's caps; null = none. */
export interface ChannelCaps {
  maxConcurrency: number | null;
  rpm: number | null;
  ipm: number | null;
  /** How long a slot stays taken if its holder never gives it back (a replica died). */
  leaseMs: number;
}

export type LimitRefusal = { refused: 'max_concurrency' | 'rpm' | 'ipm' | 'cooling_down'; retryAfterMs: number };
/** No lease when the channel has no caps (nothing to give back). */
export type Acquired = { leaseId: string | undefined };

export interface ChannelUsage {
  inFlight: number;
  calls: number;
  images: number;
  /** End of the channel's busy cool-down (epoch ms), null when it is not cooling down. */
  coolingUntil: number | null;
}

const hasCaps = (caps: ChannelCaps) => caps.maxConcurrency !== null || caps.rpm !== null || caps.ipm !== null;

/**
 * The shared state behind channel limits. `acquire` checks the channel's cool-down and all three
 * caps and, when they allow, takes a slot (a lease that expires by itself) and counts the call and
 * its images in one atomic step, so the caps hold across replicas; `release` gives the slot back.
 */
export interface ChannelLimitStore {
  acquire(channelId: string, caps: ChannelCaps, images: number, now: number): Promise<Acquired | LimitRefusal>;
  release(channelId: string, leaseId: string): Promise<void>;
  usage(channelId: string, now: number): Promise<ChannelUsage>;
  /** Cools the channel down until `untilMs` for every replica; a longer cool-down already set is kept. */
  coolDown(channelId: string, untilMs: number, now: number): Promise<void>;
  /** Takes the lease `name` for `holder` until `untilMs` when nobody holds it; true when taken. */
  takeLease(name: string, holder: string, untilMs: number, now: number): Promise<boolean>;
  /** Moves the end of a lease `holder` still holds to `untilMs` (in the past: frees it now). */
  endLeaseAt(name: string, holder: string, untilMs: number, now: number): Promise<void>;
  close(): Promise<void>;
}

// 12 base62 characters (71 bits) from the pooled CSPRNG bytes: one randomBytes call per call was 3% of the request's CPU.
const newLeaseId = () => randomBase62(12);

/** In-process, for environment channels: their cap (PROVIDER_<NAME>_MAX_CONCURRENCY) is per process, since each replica reads the account from its own environment. */
export class MemoryLimitStore implements ChannelLimitStore {
  private readonly leases = new Map<string, Map<string, number>>();
  private readonly calls = new Map<string, Array<{ at: number; images: number }>>();
  private readonly coolDowns = new Map<string, number>();
  private readonly named = new Map<string, { holder: string; expiresAt: number }>();

  private live(channelId: string, now: number) {
    const leases = this.leases.get(channelId) ?? new Map<string, number>();
    for (const [id, expiresAt] of leases) if (expiresAt <= now) leases.delete(id);
    this.leases.set(channelId, leases);
    const calls = (this.calls.get(channelId) ?? []).filter((c) => c.at > now - WINDOW_MS);
    this.calls.set(channelId, calls);
    return { leases, calls };
  }

  async acquire(channelId: string, caps: ChannelCaps, images: number, now: number): Promise<Acquired | LimitRefusal> {
    const coolingUntil = this.coolDowns.get(channelId) ?? 0;
    if (coolingUntil > now) return { refused: 'cooling_down', retryAfterMs: coolingUntil - now };
    if (!hasCaps(caps)) return { leaseId: undefined };
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
    const coolingUntil = this.coolDowns.get(channelId) ?? 0;
    return { inFlight: leases.size, calls: calls.length, images: calls.reduce((sum, c) => sum + c.images, 0), coolingUntil: coolingUntil > now ? coolingUntil : null };
  }

  async coolDown(channelId: string, untilMs: number): Promise<void> {
    this.coolDowns.set(channelId, Math.max(this.coolDowns.get(channelId) ?? 0, untilMs));
  }

  async takeLease(name: string, holder: string, untilMs: number, now: number): Promise<boolean> {
    const current = this.named.get(name);
    if (current && current.expiresAt > now) return false;
    this.named.set(name, { holder, expiresAt: untilMs });
    return true;
  }

  async endLeaseAt(name: string, holder: string, untilMs: number): Promise<void> {
    const current = this.named.get(name);
    if (current?.holder === holder) current.expiresAt = untilMs;
  }

  async close(): Promise<void> {}
}

/**
 * Leases in a sorted set scored by expiry; calls and images in sorted sets scored by time (one
 * member per image); the cool-down is a key that expires with it. Returns {1} or {0, which cap
 * or 4 for the cool-down, ms until it frees}. A channel without caps only has its cool-down checked.
 */
const ACQUIRE = `
local leases, calls, images = KEYS[1], KEYS[2], KEYS[3]
local cooling = redis.call('PTTL', KEYS[4])
if cooling > 0 then return {0, 4, cooling} end
local now, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local maxc, rpm, ipm, n = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
if maxc < 0 and rpm < 0 and ipm < 0 then return {1} end
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

const REFUSALS = ['max_concurrency', 'max_concurrency', 'rpm', 'ipm', 'cooling_down'] as const;

/** Sets the cool-down key unless it already lasts longer (a second busy answer never shortens it). */
const COOL_DOWN = `
local ms = tonumber(ARGV[1])
if redis.call('PTTL', KEYS[1]) < ms then redis.call('SET', KEYS[1], '1', 'PX', ms) end
return 1
`;

/** Moves a lease's end if `holder` still holds it; 0 ms or less frees it. */
const END_LEASE_AT = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local ms = tonumber(ARGV[2])
if ms <= 0 then redis.call('DEL', KEYS[1]) else redis.call('PEXPIRE', KEYS[1], ms) end
return 1
`;

type ScriptedRedis = {
  cgwChannelAcquire: (...args: unknown[]) => Promise<number[]>;
  cgwChannelCoolDown: (...args: unknown[]) => Promise<number>;
  cgwEndLeaseAt: (...args: unknown[]) => Promise<number>;
};

export class RedisLimitStore implements ChannelLimitStore {
  /** `redis` is the gateway's connection (it closes it); a Redis that fails is a 503, recorded in `health`. */
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly health?: DependencyHealth,
  ) {
    this.redis.defineCommand('cgwChannelAcquire', { numberOfKeys: 4, lua: ACQUIRE });
    this.redis.defineCommand('cgwChannelCoolDown', { numberOfKeys: 1, lua: COOL_DOWN });
    this.redis.defineCommand('cgwEndLeaseAt', { numberOfKeys: 1, lua: END_LEASE_AT });
  }

  private get scripts(): ScriptedRedis {
    return this.redis as unknown as ScriptedRedis;
  }

  /** One hash tag per channel: a Redis Cluster keeps a channel's keys on one node. */
  private keys(channelId: string): [string, string, string, string] {
    const base = `${this.prefix}chn:{${channelId}}:`;
    return [`${base}leases`, `${base}calls`, `${base}images`, `${base}cooldown`];
  }

  async acquire(channelId: string, caps: ChannelCaps, images: number, now: number): Promise<Acquired | LimitRefusal> {
    const leaseId = newLeaseId();
    const [ok, which, retryAfterMs] = (await callRedis(this.health, () =>
      this.scripts.cgwChannelAcquire(
        ...this.keys(channelId),
        now,
        WINDOW_MS,
        caps.maxConcurrency ?? -1,
        caps.rpm ?? -1,
        caps.ipm ?? -1,
        images,
        leaseId,
        now + caps.leaseMs,
      ),
    )) as [number, number?, number?];
    if (ok === 1) return { leaseId: hasCaps(caps) ? leaseId : undefined };
    return { refused: REFUSALS[which ?? 1]!, retryAfterMs: Math.max(0, retryAfterMs ?? 0) };
  }

  async release(channelId: string, leaseId: string): Promise<void> {
    await this.redis.zrem(this.keys(channelId)[0], leaseId);
  }

  async usage(channelId: string, now: number): Promise<ChannelUsage> {
    const [leases, calls, images, cooldown] = this.keys(channelId);
    const results = await callRedis(this.health, () =>
      this.redis
        .multi()
        .zcount(leases, `(${now}`, '+inf')
        .zcount(calls, `(${now - WINDOW_MS}`, '+inf')
        .zcount(images, `(${now - WINDOW_MS}`, '+inf')
        .pttl(cooldown)
        .exec(),
    );
    const [inFlight, callCount, imageCount, coolingMs] = (results ?? []).map(([, value]) => Number(value ?? 0));
    return { inFlight: inFlight ?? 0, calls: callCount ?? 0, images: imageCount ?? 0, coolingUntil: (coolingMs ?? 0) > 0 ? now + coolingMs! : null };
  }

  async coolDown(channelId: string, untilMs: number, now: number): Promise<void> {
    const ms = Math.ceil(untilMs - now);
    if (ms > 0) await this.scripts.cgwChannelCoolDown(this.keys(channelId)[3], ms);
  }

  private leaseKey(name: string): string {
    return `${this.prefix}lease:${name}`;
  }

  async takeLease(name: string, holder: string, untilMs: number, now: number): Promise<boolean> {
    return (await this.redis.set(this.leaseKey(name), holder, 'PX', Math.max(1, Math.ceil(untilMs - now)), 'NX')) === 'OK';
  }

  async endLeaseAt(name: string, holder: string, untilMs: number, now: number): Promise<void> {
    await this.scripts.cgwEndLeaseAt(this.leaseKey(name), holder, Math.ceil(untilMs - now));
  }

  async close(): Promise<void> {}
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
    if (!hasCaps(caps)) {
      // Nothing to count: only the cool-down, one indexed read and no transaction.
      const row = await this.db.selectFrom('channels').select('cooldown_until').where('id', '=', channelId).executeTakeFirst();
      const coolingUntil = Number(row?.cooldown_until ?? 0);
      return coolingUntil > now ? { refused: 'cooling_down', retryAfterMs: coolingUntil - now } : { leaseId: undefined };
    }
    return this.db.transaction().execute(async (trx) => {
      if (this.engine === 'postgres') await sql`SELECT pg_advisory_xact_lock(hashtext(${`chn:${channelId}`}))`.execute(trx);
      await trx.deleteFrom('channel_leases').where('channel_id', '=', channelId).where('expires_at', '<=', now).execute();
      await trx.deleteFrom('channel_calls').where('channel_id', '=', channelId).where('at', '<=', now - WINDOW_MS).execute();
      const state = await sql<{ cooldown_until: number | null; in_flight: number; next_expiry: number | null; calls: number; images: number; oldest_call: number | null }>`
        SELECT
          (SELECT cooldown_until FROM channels WHERE id = ${channelId}) AS cooldown_until,
          (SELECT count(*) FROM channel_leases WHERE channel_id = ${channelId}) AS in_flight,
          (SELECT min(expires_at) FROM channel_leases WHERE channel_id = ${channelId}) AS next_expiry,
          (SELECT count(*) FROM channel_calls WHERE channel_id = ${channelId}) AS calls,
          (SELECT coalesce(sum(images), 0) FROM channel_calls WHERE channel_id = ${channelId}) AS images,
          (SELECT min(at) FROM channel_calls WHERE channel_id = ${channelId}) AS oldest_call`.execute(trx);
      const row = state.rows[0]!;
      const coolingUntil = Number(row.cooldown_until ?? 0);
      if (coolingUntil > now) return { refused: 'cooling_down' as const, retryAfterMs: coolingUntil - now };
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
    const state = await sql<{ cooldown_until: number | null; in_flight: number; calls: number; images: number }>`
      SELECT
        (SELECT cooldown_until FROM channels WHERE id = ${channelId}) AS cooldown_until,
        (SELECT count(*) FROM channel_leases WHERE channel_id = ${channelId} AND expires_at > ${now}) AS in_flight,
        (SELECT count(*) FROM channel_calls WHERE channel_id = ${channelId} AND at > ${now - WINDOW_MS}) AS calls,
        (SELECT coalesce(sum(images), 0) FROM channel_calls WHERE channel_id = ${channelId} AND at > ${now - WINDOW_MS}) AS images`.execute(this.db);
    const row = state.rows[0]!;
    const coolingUntil = Number(row.cooldown_until ?? 0);
    return { inFlight: Number(row.in_flight), calls: Number(row.calls), images: Number(row.images), coolingUntil: coolingUntil > now ? coolingUntil : null };
  }

  async coolDown(channelId: string, untilMs: number): Promise<void> {
    // Never shortens a longer cool-down; updated_at stays, so no replica reopens the credentials.
    await this.db
      .updateTable('channels')
      .set({ cooldown_until: untilMs })
      .where('id', '=', channelId)
      .where((eb) => eb.or([eb('cooldown_until', 'is', null), eb('cooldown_until', '<', untilMs)]))
      .execute();
  }

  async takeLease(name: string, holder: string, untilMs: number, now: number): Promise<boolean> {
    // One statement: inserts the lease, or takes it over once it has expired; the primary key
    // makes two replicas' attempts exclusive.
    const result = await this.db
      .insertInto('shared_leases')
      .values({ name, holder, expires_at: untilMs })
      .onConflict((oc) =>
        oc
          .column('name')
          .doUpdateSet({ holder, expires_at: untilMs })
          .where('shared_leases.expires_at', '<=', now),
      )
      .executeTakeFirst();
    return Number(result.numInsertedOrUpdatedRows ?? 0) === 1;
  }

  async endLeaseAt(name: string, holder: string, untilMs: number): Promise<void> {
    await this.db.updateTable('shared_leases').set({ expires_at: untilMs }).where('name', '=', name).where('holder', '=', holder).execute();
  }

  async close(): Promise<void> {}
}

/** Redis when the gateway has a Redis connection (REDIS_URL), the database otherwise. */
export function createChannelLimitStore(
  redis: RedisClient | undefined,
  prefix: string,
  health: DependencyHealth | undefined,
  db: Kysely<Database>,
  engine: DatabaseEngine,
): ChannelLimitStore {
  return redis ? new RedisLimitStore(redis, prefix, health) : new SqlLimitStore(db, engine);
}
