import type Redis from 'ioredis';
import type { Logger } from 'pino';
import type { GatewayConfig } from '../config/config';
import type { GatewayDatabase } from '../db/database';
import { createRedisClient } from '../ratelimit/redis-client';
import { type FoundKey, foundKeyOf } from './key.model';
import { type Db, findKeyByHash } from './keys.repository';

/**
 * How the client-key guard finds a key by the hash of its secret. Every admin change of a key
 * calls `changed(id)` once it has committed.
 */
export interface KeyLookup {
  find(db: Db, keyHash: string): Promise<FoundKey | undefined>;
  changed(id: string): Promise<void>;
  close(): Promise<void>;
}

/** No cache: one SELECT by hash per request (PostgreSQL without Redis: nothing would tell a replica of a change). */
export const directKeyLookup: KeyLookup = {
  find: findKey,
  changed: async () => undefined,
  close: async () => undefined,
};

/**
 * An upper bound on how long an entry is used. Admin changes reach every replica through Redis
 * pub/sub at once; this bound only matters for a change whose message was lost (the replica that
 * made it could not reach Redis while this one could).
 */
export const KEY_CACHE_TTL_MS = 60_000;
/** A few hundred bytes an entry: at most a few MB; beyond, the oldest entries go first. */
const KEY_CACHE_MAX_ENTRIES = 20_000;
/** SQLite: how often the cache asks whether another connection changed the file. */
export const DATA_VERSION_CHECK_MS = 50;

interface Entry {
  key: FoundKey;
  at: number;
}

async function findKey(db: Db, keyHash: string): Promise<FoundKey | undefined> {
  const row = await findKeyByHash(db, keyHash);
  return row && foundKeyOf(row);
}

/**
 * Found keys by hash, in process (what the guard needs of each row, not the row): what both caches share. `changed(id)` (after an admin change
 * committed) drops the key's entry. A lookup that started before an invalidation is not cached
 * (an epoch counter), so a row read before a commit cannot outlive the invalidation that followed
 * it. `usable()` says whether the cache may be read and filled at all (else: one SELECT, nothing kept).
 *
 * What a cached row cannot decide is checked again in the reservation statement, on the row as it
 * is then (keys.repository.ts): a disabled, expired or rotated-away secret is never charged and
 * never starts a generation once the change committed, cache or not.
 */
abstract class KeyRowCache implements KeyLookup {
  private readonly entries = new Map<string, Entry>();
  private readonly hashById = new Map<string, string>();
  private epoch = 0;

  constructor(
    private readonly ttlMs: number,
    private readonly now: () => number,
  ) {}

  protected abstract usable(): boolean;
  abstract changed(id: string): Promise<void>;
  abstract close(): Promise<void>;

  async find(db: Db, keyHash: string): Promise<FoundKey | undefined> {
    if (!this.usable()) return findKey(db, keyHash);
    const hit = this.entries.get(keyHash);
    if (hit && this.now() - hit.at < this.ttlMs) return hit.key;
    const epoch = this.epoch;
    const at = this.now();
    const key = await findKey(db, keyHash);
    if (key && epoch === this.epoch && this.usable()) this.put(keyHash, key, at);
    return key;
  }

  private put(keyHash: string, key: FoundKey, at: number): void {
    const id = key.client.id;
    const previous = this.hashById.get(id);
    if (previous !== undefined && previous !== keyHash) this.entries.delete(previous);
    this.entries.delete(keyHash);
    if (this.entries.size >= KEY_CACHE_MAX_ENTRIES) {
      const oldest = this.entries.keys().next().value as string;
      const evicted = this.entries.get(oldest);
      this.entries.delete(oldest);
      if (evicted) this.hashById.delete(evicted.key.client.id);
    }
    this.entries.set(keyHash, { key, at });
    this.hashById.set(id, keyHash);
  }

  protected drop(id: string): void {
    this.epoch += 1;
    const keyHash = this.hashById.get(id);
    this.hashById.delete(id);
    if (keyHash !== undefined) this.entries.delete(keyHash);
  }

  protected clear(): void {
    this.epoch += 1;
    this.entries.clear();
    this.hashById.clear();
  }
}

/**
 * For replicas sharing Redis (PostgreSQL + Redis), so the request path does not ask PostgreSQL for
 * the key on every request.
 *
 * Invalidation: `changed(id)` drops the entry here and publishes the id on `<prefix>keys:changed`;
 * every replica subscribes and drops its entry when the message arrives. While the subscription is
 * not confirmed (starting, Redis down, reconnecting) the cache is neither read nor filled, and it is
 * emptied when the subscription drops: a replica that may miss messages does not use it.
 *
 * What follows the cache until the message arrives (normally well under a millisecond after the
 * commit; at worst KEY_CACHE_TTL_MS when a message was lost): rate_limit_rpm, allowed providers,
 * models and IPs, max_concurrent, alert thresholds, and the reads a key may make (GET /v1/models,
 * its generations).
 */
export class CachedKeyLookup extends KeyRowCache {
  private live = false;
  private readonly channel: string;

  constructor(
    private readonly subscriber: Redis,
    private readonly publisher: Redis,
    prefix: string,
    private readonly logger: Logger,
    ttlMs = KEY_CACHE_TTL_MS,
    now: () => number = Date.now,
  ) {
    super(ttlMs, now);
    this.channel = `${prefix}keys:changed`;
    subscriber.on('message', (channel: string, id: string) => {
      if (channel === this.channel) this.drop(id);
    });
    const down = () => {
      this.live = false;
      this.clear();
    };
    subscriber.on('close', down);
    subscriber.on('end', down);
    subscriber.on('ready', () => {
      subscriber.subscribe(this.channel).then(
        () => {
          // Nothing cached before this point: messages of the gap were not seen.
          this.clear();
          this.live = subscriber.status === 'ready';
        },
        (error: unknown) => this.logger.warn({ err: error }, 'key cache could not subscribe to key changes'),
      );
    });
  }

  /** Whether the cache is in use (subscribed to key changes). */
  get active(): boolean {
    return this.live;
  }

  protected usable(): boolean {
    return this.live;
  }

  async changed(id: string): Promise<void> {
    this.drop(id);
    try {
      await this.publisher.publish(this.channel, id);
    } catch (error) {
      // Committed already; other replicas drop their entry within KEY_CACHE_TTL_MS.
      this.logger.warn({ err: error, key_id: id }, 'could not publish a key change to the other replicas');
    }
  }

  async close(): Promise<void> {
    this.live = false;
    this.clear();
    this.subscriber.disconnect();
    this.publisher.disconnect();
  }
}

/**
 * For a gateway on SQLite. This process's admin changes drop their entry at once (`changed`); a
 * commit to the file by any other connection (a second process on the same file, a restore) empties
 * the whole cache within DATA_VERSION_CHECK_MS: SQLite's `PRAGMA data_version` moves exactly then.
 * It is not read on every lookup because reading anything outside a transaction starts a WAL read
 * (locks on the shared-memory index): measured 39 us a request, about what the key SELECT costs.
 */
export class SqliteKeyLookup extends KeyRowCache {
  private version: number;
  private checkedAt: number;

  constructor(
    /** `PRAGMA data_version` on the connection the gateway's queries use. */
    private readonly dataVersion: () => number,
    ttlMs = KEY_CACHE_TTL_MS,
    private readonly clock: () => number = Date.now,
  ) {
    super(ttlMs, clock);
    this.version = dataVersion();
    this.checkedAt = clock();
  }

  protected usable(): boolean {
    const now = this.clock();
    if (now - this.checkedAt < DATA_VERSION_CHECK_MS) return true;
    this.checkedAt = now;
    const version = this.dataVersion();
    if (version !== this.version) {
      this.version = version;
      this.clear();
    }
    return true;
  }

  async changed(id: string): Promise<void> {
    this.drop(id);
  }

  async close(): Promise<void> {
    this.clear();
  }
}

/** The cache of the engine: SQLite's own, or Redis-invalidated when replicas share Redis and a database across hosts (PostgreSQL); else none. */
export function createKeyLookup(
  config: Pick<GatewayConfig, 'redisConnectTimeoutMs' | 'redisCommandTimeoutMs' | 'redisUrl' | 'redisPrefix'>,
  database: Pick<GatewayDatabase, 'capabilities' | 'dataVersion'>,
  logger: Logger,
): KeyLookup {
  if (database.dataVersion) return new SqliteKeyLookup(database.dataVersion);
  if (!database.capabilities.sharedAcrossHosts || config.redisUrl === undefined) return directKeyLookup;
  const redis = { ...config, redisUrl: config.redisUrl };
  return new CachedKeyLookup(createRedisClient(redis, undefined), createRedisClient(redis, undefined), config.redisPrefix, logger);
}
