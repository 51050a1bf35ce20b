import type RedisClient from 'ioredis';
import { type Kysely, sql } from 'kysely';
import type { Logger } from 'pino';
import type { DatabaseEngine } from '../db/database';
import type { Database } from '../db/schema';
import type { DependencyHealth } from '../health/dependency-health';
import { callRedis } from '../ratelimit/redis-client';
import type { Clock } from '../shared/clock';
import { randomBase62 } from '../shared/ids';
import { RenewedSet } from '../shared/renewed-set';

/**
 * A key's `max_concurrent`: one lease per generation in flight, shared by every replica (Redis when
 * REDIS_URL is set, else the database). A lease expires `ttlMs` after its last renewal; the process
 * holding it renews it every third of that while the generation runs (all its leases at once, from
 * one timer), so a replica that dies (SIGKILL, power loss) frees its slots within `ttlMs`.
 */
export interface ConcurrencyLeases {
  /** Takes one of the key's `max` slots, or answers undefined when all are taken. */
  acquire(keyId: string, max: number): Promise<HeldLease | undefined>;
  close(): Promise<void>;
}

export interface HeldLease {
  release(): Promise<void>;
}

/** Where leases live: check-and-take must be atomic across processes. */
interface LeaseStore {
  tryTake(keyId: string, leaseId: string, max: number, now: number, expiresAt: number): Promise<boolean>;
  /** Pushes the expiry of these leases (at most RENEWAL_BATCH of renewed-set.ts) to `expiresAt`; a lease already gone stays gone. */
  renewAll(leases: ReadonlyArray<readonly [leaseId: string, keyId: string]>, expiresAt: number): Promise<void>;
  drop(keyId: string, leaseId: string): Promise<void>;
  close(): Promise<void>;
}

class RenewedLeases implements ConcurrencyLeases {
  /** The leases this process holds (lease id -> key id): one timer, one statement or pipeline per 500. */
  private readonly held: RenewedSet<string, string>;

  constructor(
    private readonly store: LeaseStore,
    private readonly clock: Clock,
    private readonly ttlMs: number,
    private readonly logger: Logger,
  ) {
    this.held = new RenewedSet(
      Math.floor(ttlMs / 3),
      (batch) => store.renewAll(batch, clock.now() + ttlMs),
      (error, leases) => logger.warn({ err: error, leases }, 'could not renew concurrency leases'),
    );
  }

  async acquire(keyId: string, max: number): Promise<HeldLease | undefined> {
    const leaseId = `lease_${randomBase62(22)}`;
    const now = this.clock.now();
    if (!(await this.store.tryTake(keyId, leaseId, max, now, now + this.ttlMs))) return undefined;
    this.held.add(leaseId, keyId);
    let released = false;
    return {
      release: async () => {
        if (released) return;
        released = true;
        this.held.delete(leaseId);
        try {
          await this.store.drop(keyId, leaseId);
        } catch (error) {
          // The lease then lapses by itself within ttlMs.
          this.logger.warn({ err: error, key_id: keyId }, 'could not release a concurrency lease');
        }
      },
    };
  }

  close(): Promise<void> {
    this.held.stop();
    return this.store.close();
  }
}

/** Drop expired leases, count the live ones, add ours if under the cap: one Lua script, so atomic. */
const TAKE_SCRIPT = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
`;
const RENEW_SCRIPT = `
if redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return 1
`;

class RedisLeaseStore implements LeaseStore {
  /** `redis` is the gateway's connection (it closes it); a Redis that fails when taking a slot is a 503. */
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly ttlMs: number,
    private readonly health: DependencyHealth | undefined,
  ) {
    redis.defineCommand('cgwLeaseTake', { numberOfKeys: 1, lua: TAKE_SCRIPT });
    redis.defineCommand('cgwLeaseRenew', { numberOfKeys: 1, lua: RENEW_SCRIPT });
  }

  private get commands() {
    return this.redis as unknown as {
      cgwLeaseTake: (...args: unknown[]) => Promise<number>;
      cgwLeaseRenew: (...args: unknown[]) => Promise<number>;
    };
  }

  private setKey(keyId: string): string {
    return `${this.prefix}cc:${keyId}`;
  }

  async tryTake(keyId: string, leaseId: string, max: number, now: number, expiresAt: number): Promise<boolean> {
    return (await callRedis(this.health, () => this.commands.cgwLeaseTake(this.setKey(keyId), now, max, expiresAt, leaseId, this.ttlMs))) === 1;
  }

  async renewAll(leases: ReadonlyArray<readonly [leaseId: string, keyId: string]>, expiresAt: number): Promise<void> {
    // One pipeline: one write to Redis for the whole batch.
    const pipeline = this.redis.pipeline() as unknown as { cgwLeaseRenew: (...args: unknown[]) => void; exec: () => Promise<Array<[Error | null, unknown]> | null> };
    for (const [leaseId, keyId] of leases) pipeline.cgwLeaseRenew(this.setKey(keyId), expiresAt, leaseId, this.ttlMs);
    const failed = (await pipeline.exec())?.find(([error]) => error !== null)?.[0];
    if (failed) throw failed;
  }

  async drop(keyId: string, leaseId: string): Promise<void> {
    await this.redis.zrem(this.setKey(keyId), leaseId);
  }

  async close(): Promise<void> {}
}

/**
 * Leases in the key_leases table. On PostgreSQL a per-key advisory lock serialises check-and-take;
 * on SQLite check-and-take is one INSERT ... SELECT, which holds the write lock from its start.
 */
class SqlLeaseStore implements LeaseStore {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly engine: DatabaseEngine,
  ) {}

  async tryTake(keyId: string, leaseId: string, max: number, now: number, expiresAt: number): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      if (this.engine === 'postgres') await sql`SELECT pg_advisory_xact_lock(hashtext(${`lease:${keyId}`}))`.execute(trx);
      await trx.deleteFrom('key_leases').where('key_id', '=', keyId).where('expires_at', '<=', now).execute();
      const inserted = await sql`
        INSERT INTO key_leases (lease_id, key_id, expires_at)
        SELECT CAST(${leaseId} AS varchar(64)), CAST(${keyId} AS varchar(64)), CAST(${expiresAt} AS bigint)
        WHERE (SELECT count(*) FROM key_leases WHERE key_id = ${keyId} AND expires_at > ${now}) < ${max}`.execute(trx);
      return Number(inserted.numAffectedRows ?? 0) === 1;
    });
  }

  async renewAll(leases: ReadonlyArray<readonly [leaseId: string, keyId: string]>, expiresAt: number): Promise<void> {
    await this.db
      .updateTable('key_leases')
      .set({ expires_at: expiresAt })
      .where(
        'lease_id',
        'in',
        leases.map(([leaseId]) => leaseId),
      )
      .execute();
  }

  async drop(_keyId: string, leaseId: string): Promise<void> {
    await this.db.deleteFrom('key_leases').where('lease_id', '=', leaseId).execute();
  }

  async close(): Promise<void> {}
}

export interface ConcurrencyLeaseOptions {
  db: Kysely<Database>;
  engine: DatabaseEngine;
  /** The gateway's Redis connection (REDIS_URL), undefined without Redis. */
  redis: RedisClient | undefined;
  redisPrefix: string;
  health?: DependencyHealth;
  clock: Clock;
  ttlMs: number;
  logger: Logger;
}

/** Redis when the gateway has a Redis connection (REDIS_URL), else the database. */
export function createConcurrencyLeases(options: ConcurrencyLeaseOptions): ConcurrencyLeases {
  const store: LeaseStore = options.redis
    ? new RedisLeaseStore(options.redis, options.redisPrefix, options.ttlMs, options.health)
    : new SqlLeaseStore(options.db, options.engine);
  return new RenewedLeases(store, options.clock, options.ttlMs, options.logger);
}
