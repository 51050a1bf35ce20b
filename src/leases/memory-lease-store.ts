import { randomBase62 } from '../shared/ids';
import { type Acquisition, fits, freesAtIndex, type LeaseClaim, type LeaseRef, type LeaseStore, reportsFreesAt, scopeKey, type ScopeState } from './lease-store';

interface HeldLease {
  leaseId: string;
  units: number;
  expiresAt: number;
}

/** A scope's live leases, soonest expiry first, and their units. */
interface Scope {
  leases: HeldLease[];
  units: number;
}

/** Drops idle scopes every this many acquisitions, so memory follows active scopes, not all scopes ever seen. */
const SWEEP_EVERY = 10_000;

/** Leases in process memory: exact for one process (environment channels, RATE_LIMIT_STORE=memory). */
export class MemoryLeaseStore implements LeaseStore {
  private readonly scopes = new Map<string, Scope>();
  private acquisitionsSinceSweep = 0;

  /** The scope with its expired leases dropped. */
  private live(key: string, now: number): Scope {
    let scope = this.scopes.get(key);
    if (!scope) {
      scope = { leases: [], units: 0 };
      this.scopes.set(key, scope);
    }
    let expired = 0;
    while (expired < scope.leases.length && scope.leases[expired]!.expiresAt <= now) {
      scope.units -= scope.leases[expired]!.units;
      expired += 1;
    }
    if (expired > 0) scope.leases.splice(0, expired);
    return scope;
  }

  private state(scope: Scope, claim: LeaseClaim, report: boolean): ScopeState {
    if (!report) return { held: scope.units };
    const index = freesAtIndex(claim.limit, scope.units, claim.units);
    let counted = 0;
    for (const lease of scope.leases) {
      counted += lease.units;
      if (counted > index) return { held: scope.units, freesAt: lease.expiresAt };
    }
    return { held: scope.units };
  }

  async acquire(claims: readonly LeaseClaim[], now: number, leaseId = randomBase62(12)): Promise<Acquisition> {
    this.sweepNowAndThen(now);
    const scopes = claims.map((claim) => this.live(scopeKey(claim.scope), now));
    const refusedClaim = claims.findIndex((claim, i) => !fits(claim.limit, scopes[i]!.units, claim.units));
    if (refusedClaim < 0) {
      claims.forEach((claim, i) => {
        if (claim.units > 0) insertByExpiry(scopes[i]!, { leaseId, units: claim.units, expiresAt: claim.expiresAt });
      });
    }
    const states = claims.map((claim, i) => this.state(scopes[i]!, claim, reportsFreesAt(claim, i, refusedClaim)));
    return refusedClaim < 0 ? { granted: true, leaseId, states } : { granted: false, refusedClaim, states };
  }

  async check(claims: readonly LeaseClaim[], now: number): Promise<ScopeState[]> {
    return claims.map((claim) => this.state(this.live(scopeKey(claim.scope), now), claim, claim.reportFreesAt === true));
  }

  async release(leases: readonly LeaseRef[]): Promise<void> {
    for (const ref of leases) this.take(ref);
  }

  async renew(leases: readonly LeaseRef[], expiresAt: number): Promise<void> {
    for (const ref of leases) {
      const lease = this.take(ref);
      if (lease) insertByExpiry(this.scopes.get(scopeKey(ref.scope))!, { ...lease, expiresAt });
    }
  }

  /** Removes a lease from its scope, answering it (undefined when it is gone). */
  private take(ref: LeaseRef): HeldLease | undefined {
    const scope = this.scopes.get(scopeKey(ref.scope));
    const index = scope?.leases.findIndex((lease) => lease.leaseId === ref.leaseId) ?? -1;
    if (!scope || index < 0) return undefined;
    const [lease] = scope.leases.splice(index, 1);
    scope.units -= lease!.units;
    return lease;
  }

  private sweepNowAndThen(now: number): void {
    this.acquisitionsSinceSweep += 1;
    if (this.acquisitionsSinceSweep < SWEEP_EVERY) return;
    this.acquisitionsSinceSweep = 0;
    for (const [key, scope] of this.scopes) {
      if (scope.leases.every((lease) => lease.expiresAt <= now)) this.scopes.delete(key);
    }
  }

  async close(): Promise<void> {
    this.scopes.clear();
  }
}

/** Keeps a scope's leases ordered by expiry; equal expiries keep their order of arrival. */
function insertByExpiry(scope: Scope, lease: HeldLease): void {
  let at = scope.leases.length;
  while (at > 0 && scope.leases[at - 1]!.expiresAt > lease.expiresAt) at -= 1;
  scope.leases.splice(at, 0, lease);
  scope.units += lease.units;
}
