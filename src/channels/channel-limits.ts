import type RedisClient from 'ioredis';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema';
import type { DependencyHealth } from '../health/dependency-health';
import type { LeaseClaim, LeaseScope, LeaseStore } from '../leases/lease-store';
import { sharedLeaseStore } from '../leases/shared-lease-store';
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

/** What each claim of an acquisition stands for, in the order they are checked. */
const REFUSALS = ['cooling_down', 'max_concurrency', 'rpm', 'ipm'] as const;

interface ChannelScopes {
  coolDown: LeaseScope;
  concurrency: LeaseScope;
  calls: LeaseScope;
  images: LeaseScope;
}

/** A channel's scopes, made once per channel id: every call of a channel names them (acquire and release). */
const scopesById = new Map<string, ChannelScopes>();
const scopes = (channelId: string): ChannelScopes => {
  let found = scopesById.get(channelId);
  if (found === undefined) {
    const owner = `channel:${channelId}`;
    found = {
      coolDown: { owner, name: 'cooldown' },
      concurrency: { owner, name: 'concurrency' },
      calls: { owner, name: 'calls' },
      images: { owner, name: 'images' },
    };
    scopesById.set(channelId, found);
  }
  return found;
};

const namedLease = (name: string): LeaseScope => ({ owner: `shared:${name}`, name: 'holder' });

// 12 base62 characters (71 bits) from the pooled CSPRNG bytes: one randomBytes call per call was 3% of the request's CPU.
const newLeaseId = () => randomBase62(12);
/** The lease id of an acquisition that takes no units (a channel without caps): nothing is stored under it. */
const NO_LEASE = 'none';

/**
 * Channel limits as leases of the channel's scopes: a slot in flight (`concurrency`, released when
 * the call ends), a call and its images (`calls`, `images`, lapsing after the rpm/ipm window), a
 * cool-down (`cooldown`, limit 0: no call while one is live). One store call per acquisition.
 * On memory for environment channels (their cap, PROVIDER_<NAME>_MAX_CONCURRENCY, is per process,
 * since each replica reads the account from its own environment), on the shared store otherwise.
 */
export class ChannelLimits implements ChannelLimitStore {
  constructor(private readonly store: LeaseStore) {}

  async acquire(channelId: string, caps: ChannelCaps, images: number, now: number): Promise<Acquired | LimitRefusal> {
    const scope = scopes(channelId);
    const claims: LeaseClaim[] = [{ scope: scope.coolDown, limit: 0, units: 0, expiresAt: now }];
    // A channel without caps counts nothing: only its cool-down is checked.
    if (hasCaps(caps)) {
      claims.push(
        { scope: scope.concurrency, limit: caps.maxConcurrency, units: 1, expiresAt: now + caps.leaseMs },
        { scope: scope.calls, limit: caps.rpm, units: 1, expiresAt: now + WINDOW_MS },
        { scope: scope.images, limit: caps.ipm, units: images, expiresAt: now + WINDOW_MS },
      );
    }
    // Without caps nothing is taken (the cool-down claim has 0 units), so no lease id is drawn.
    const taken = await this.store.acquire(claims, now, hasCaps(caps) ? newLeaseId() : NO_LEASE);
    if (taken.granted) return { leaseId: hasCaps(caps) ? taken.leaseId : undefined };
    // Nothing frees in time for a claim larger than its limit: a lease taken now would lapse first.
    const freesAt = taken.states[taken.refusedClaim]!.freesAt ?? claims[taken.refusedClaim]!.expiresAt;
    return { refused: REFUSALS[taken.refusedClaim]!, retryAfterMs: Math.max(0, freesAt - now) };
  }

  async release(channelId: string, leaseId: string): Promise<void> {
    await this.store.release([{ scope: scopes(channelId).concurrency, leaseId, units: 1 }]);
  }

  async usage(channelId: string, now: number): Promise<ChannelUsage> {
    const scope = scopes(channelId);
    const [inFlight, calls, images, coolDown] = await this.store.check(
      [
        { scope: scope.concurrency, limit: null, units: 0, expiresAt: now },
        { scope: scope.calls, limit: null, units: 0, expiresAt: now },
        { scope: scope.images, limit: null, units: 0, expiresAt: now },
        // The cool-down lasting longest: the last unit of a limit-0 scope.
        { scope: scope.coolDown, limit: 0, units: 0, expiresAt: now, reportFreesAt: true },
      ],
      now,
    );
    return { inFlight: inFlight!.held, calls: calls!.held, images: images!.held, coolingUntil: coolDown!.held > 0 ? (coolDown!.freesAt ?? null) : null };
  }

  async coolDown(channelId: string, untilMs: number, now: number): Promise<void> {
    // One lease per cool-down: a shorter one never ends a longer one.
    if (untilMs > now) await this.store.acquire([{ scope: scopes(channelId).coolDown, limit: null, units: 1, expiresAt: untilMs }], now);
  }

  async takeLease(name: string, holder: string, untilMs: number, now: number): Promise<boolean> {
    return (await this.store.acquire([{ scope: namedLease(name), limit: 1, units: 1, expiresAt: untilMs }], now, holder)).granted;
  }

  async endLeaseAt(name: string, holder: string, untilMs: number, now: number): Promise<void> {
    await this.store.renew([{ scope: namedLease(name), leaseId: holder, units: 1 }], untilMs, now);
  }

  close(): Promise<void> {
    return this.store.close();
  }
}

/** Redis when the gateway has a Redis connection (REDIS_URL), the database otherwise. */
export function createChannelLimitStore(
  redis: RedisClient | undefined,
  prefix: string,
  health: DependencyHealth | undefined,
  db: Kysely<Database>,
): ChannelLimitStore {
  return new ChannelLimits(sharedLeaseStore(redis, prefix, health, db));
}
