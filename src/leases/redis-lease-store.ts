import type RedisClient from 'ioredis';
import type { DependencyHealth } from '../health/dependency-health';
import { callRedis } from '../ratelimit/redis-client';
import { randomBase62 } from '../shared/ids';
import type { Acquisition, LeaseClaim, LeaseRef, LeaseScope, LeaseStore, ScopeState } from './lease-store';

/**
 * Acquire (ARGV[3] = 1) or check (0) in one script, so atomic across replicas. A scope is a sorted
 * set of units scored by expiry: a lease of n units is the members id, id:2 ... id:n. Arguments:
 * now, lease id, take, then per key: limit (-1: none), units, expiry, report freesAt (1/0).
 * Returns {first refused key (0: none), then per key: held units, freesAt or -1}.
 */
const ACQUIRE = `
local now, id, take = tonumber(ARGV[1]), ARGV[2], ARGV[3] == '1'
local held, limits, units = {}, {}, {}
local refused = 0
for i = 1, #KEYS do
  local at = 4 + (i - 1) * 4
  limits[i], units[i] = tonumber(ARGV[at]), tonumber(ARGV[at + 1])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
  held[i] = redis.call('ZCARD', KEYS[i])
  if refused == 0 and limits[i] >= 0 and held[i] + units[i] > limits[i] then refused = i end
end
if take and refused == 0 then
  for i = 1, #KEYS do
    local expiresAt = tonumber(ARGV[4 + (i - 1) * 4 + 2])
    for u = 1, units[i] do
      local member = id
      if u > 1 then member = id .. ':' .. u end
      redis.call('ZADD', KEYS[i], expiresAt, member)
    end
    local ms = expiresAt - now
    if units[i] > 0 and ms > 0 and redis.call('PTTL', KEYS[i]) < ms then redis.call('PEXPIRE', KEYS[i], ms) end
    held[i] = held[i] + units[i]
  end
end
local out = {refused}
for i = 1, #KEYS do
  local report = ARGV[4 + (i - 1) * 4 + 3] == '1'
  if take then report = i == refused or (refused == 0 and report) end
  local frees = -1
  if report then
    local index = 0
    if limits[i] >= 0 then index = math.max(0, held[i] + units[i] - limits[i] - 1) end
    local entry = redis.call('ZRANGE', KEYS[i], index, index, 'WITHSCORES')
    if entry[2] then frees = tonumber(entry[2]) end
  end
  out[#out + 1] = held[i]
  out[#out + 1] = frees
end
return out
`;

/** Moves the members given that are still there to ARGV[1]; keeps the set alive at least that long. */
const RENEW = `
local expiresAt, now = tonumber(ARGV[1]), tonumber(ARGV[2])
local changed = 0
for i = 3, #ARGV do changed = changed + redis.call('ZADD', KEYS[1], 'XX', 'CH', expiresAt, ARGV[i]) end
local ms = expiresAt - now
if changed > 0 and ms > 0 and redis.call('PTTL', KEYS[1]) < ms then redis.call('PEXPIRE', KEYS[1], ms) end
return changed
`;

type Scripted = {
  cgwLeaseAcquire: (...args: Array<string | number>) => Promise<number[]>;
};
type ScriptedPipeline = {
  cgwLeaseRenew: (...args: Array<string | number>) => void;
  zrem: (key: string, ...members: string[]) => void;
  exec: () => Promise<Array<[Error | null, unknown]> | null>;
};

const members = (ref: LeaseRef) => Array.from({ length: ref.units }, (_, u) => (u === 0 ? ref.leaseId : `${ref.leaseId}:${u + 1}`));

/**
 * Leases in Redis, one sorted set per scope. An owner's scopes share a hash tag, so a Redis
 * Cluster keeps them on one node and one script can take from all of them.
 */
export class RedisLeaseStore implements LeaseStore {
  /** `redis` is the gateway's connection (it closes it); a Redis that fails to acquire or check is a 503, recorded in `health`. */
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly health?: DependencyHealth,
  ) {
    redis.defineCommand('cgwLeaseAcquire', { lua: ACQUIRE });
    redis.defineCommand('cgwLeaseRenew', { numberOfKeys: 1, lua: RENEW });
  }

  private key(scope: LeaseScope): string {
    return `${this.prefix}lease:{${scope.owner}}:${scope.name}`;
  }

  private async run(claims: readonly LeaseClaim[], now: number, leaseId: string, take: boolean): Promise<{ refused: number; states: ScopeState[] }> {
    const args: Array<string | number> = [claims.length, ...claims.map((claim) => this.key(claim.scope)), now, leaseId, take ? 1 : 0];
    for (const claim of claims) args.push(claim.limit ?? -1, claim.units, claim.expiresAt, claim.reportFreesAt ? 1 : 0);
    const reply = await callRedis(this.health, () => (this.redis as unknown as Scripted).cgwLeaseAcquire(...args));
    const states = claims.map((_, i): ScopeState => {
      const held = Number(reply[1 + i * 2]);
      const freesAt = Number(reply[2 + i * 2]);
      return freesAt < 0 ? { held } : { held, freesAt };
    });
    return { refused: Number(reply[0]) - 1, states };
  }

  async acquire(claims: readonly LeaseClaim[], now: number, leaseId = randomBase62(12)): Promise<Acquisition> {
    const { refused, states } = await this.run(claims, now, leaseId, true);
    return refused < 0 ? { granted: true, leaseId, states } : { granted: false, refusedClaim: refused, states };
  }

  async check(claims: readonly LeaseClaim[], now: number): Promise<ScopeState[]> {
    return (await this.run(claims, now, '', false)).states;
  }

  async release(leases: readonly LeaseRef[]): Promise<void> {
    if (leases.length === 1) {
      await this.redis.zrem(this.key(leases[0]!.scope), ...members(leases[0]!));
      return;
    }
    const pipeline = this.redis.pipeline() as unknown as ScriptedPipeline;
    for (const ref of leases) pipeline.zrem(this.key(ref.scope), ...members(ref));
    await this.execute(pipeline);
  }

  async renew(leases: readonly LeaseRef[], expiresAt: number, now: number): Promise<void> {
    // One pipeline: one write to Redis for the whole batch.
    const pipeline = this.redis.pipeline() as unknown as ScriptedPipeline;
    for (const ref of leases) pipeline.cgwLeaseRenew(this.key(ref.scope), expiresAt, now, ...members(ref));
    await this.execute(pipeline);
  }

  private async execute(pipeline: ScriptedPipeline): Promise<void> {
    const failed = (await pipeline.exec())?.find(([error]) => error !== null)?.[0];
    if (failed) throw failed;
  }

  /** The connection is the gateway's, shared with other stores: startGateway closes it. */
  async close(): Promise<void> {}
}
