import {
  type Acquisition,
  fits,
  freesAtIndex,
  type LeaseClaim,
  type LeaseRef,
  type LeaseStore,
  reportsFreesAt,
  scopeKey,
  type ScopeState,
} from './lease-store';

/**
 * A scope's live leases, soonest expiry first, as parallel arrays from `head` on: a rate count holds
 * a lease per request for a minute (one per key and request, tens of thousands at full load), so a
 * lease is three array slots, not an object and an id string that would outlive the young
 * generation and churn the old one. Lapsed leases are dropped by moving `head`; the arrays are
 * compacted once the dropped part is the larger.
 */
interface Scope {
  expiries: number[];
  units: number[];
  /** The caller's lease id, or the store's own number for a lease taken without one. */
  ids: Array<string | number>;
  head: number;
  held: number;
}

/** Drops idle scopes every this many acquisitions, so memory follows active scopes, not all scopes ever seen. */
const SWEEP_EVERY = 10_000;
/** Lease ids the store numbers itself: the prefix, then the number (parsed back on release and renew). */
const OWN_ID_PREFIX = '~';

/** Leases in process memory: exact for one process (environment channels, RATE_LIMIT_STORE=memory). */
export class MemoryLeaseStore implements LeaseStore {
  private readonly scopes = new Map<string, Scope>();
  private acquisitionsSinceSweep = 0;
  private lastOwnId = 0;

  /** The scope with its expired leases dropped. */
  private live(key: string, now: number): Scope {
    let scope = this.scopes.get(key);
    if (!scope) {
      scope = { expiries: [], units: [], ids: [], head: 0, held: 0 };
      this.scopes.set(key, scope);
    }
    const { expiries, units } = scope;
    let head = scope.head;
    while (head < expiries.length && expiries[head]! <= now) {
      scope.held -= units[head]!;
      head += 1;
    }
    scope.head = head;
    if (head > 0 && head * 2 >= expiries.length) compact(scope);
    return scope;
  }

  private state(scope: Scope, claim: LeaseClaim, report: boolean): ScopeState {
    if (!report) return { held: scope.held };
    const index = freesAtIndex(claim.limit, scope.held, claim.units);
    let counted = 0;
    for (let i = scope.head; i < scope.expiries.length; i++) {
      counted += scope.units[i]!;
      if (counted > index) return { held: scope.held, freesAt: scope.expiries[i]! };
    }
    return { held: scope.held };
  }

  async acquire(claims: readonly LeaseClaim[], now: number, leaseId?: string): Promise<Acquisition> {
    this.sweepNowAndThen(now);
    const scopes = claims.map((claim) => this.live(scopeKey(claim.scope), now));
    const refusedClaim = claims.findIndex((claim, i) => !fits(claim.limit, scopes[i]!.held, claim.units));
    let id: string | number = leaseId ?? 0;
    if (refusedClaim < 0) {
      if (leaseId === undefined) id = ++this.lastOwnId;
      claims.forEach((claim, i) => {
        if (claim.units > 0) insertByExpiry(scopes[i]!, id, claim.units, claim.expiresAt);
      });
    }
    const states = claims.map((claim, i) => this.state(scopes[i]!, claim, reportsFreesAt(claim, i, refusedClaim)));
    return refusedClaim < 0
      ? { granted: true, leaseId: typeof id === 'number' ? `${OWN_ID_PREFIX}${id}` : id, states }
      : { granted: false, refusedClaim, states };
  }

  async check(claims: readonly LeaseClaim[], now: number): Promise<ScopeState[]> {
    return claims.map((claim) => this.state(this.live(scopeKey(claim.scope), now), claim, claim.reportFreesAt === true));
  }

  async release(leases: readonly LeaseRef[]): Promise<void> {
    for (const ref of leases) this.take(ref);
  }

  async renew(leases: readonly LeaseRef[], expiresAt: number): Promise<void> {
    for (const ref of leases) {
      const taken = this.take(ref);
      if (taken) insertByExpiry(taken.scope, taken.id, taken.units, expiresAt);
    }
  }

  /** Removes a lease from its scope, answering what it held (undefined when it is gone). */
  private take(ref: LeaseRef): { scope: Scope; id: string | number; units: number } | undefined {
    const scope = this.scopes.get(scopeKey(ref.scope));
    if (!scope) return undefined;
    const own = ownIdOf(ref.leaseId);
    let index = own === undefined ? -1 : scope.ids.indexOf(own, scope.head);
    if (index < 0) index = scope.ids.indexOf(ref.leaseId, scope.head);
    if (index < 0) return undefined;
    const id = scope.ids[index]!;
    const units = scope.units[index]!;
    scope.expiries.splice(index, 1);
    scope.units.splice(index, 1);
    scope.ids.splice(index, 1);
    scope.held -= units;
    return { scope, id, units };
  }

  private sweepNowAndThen(now: number): void {
    this.acquisitionsSinceSweep += 1;
    if (this.acquisitionsSinceSweep < SWEEP_EVERY) return;
    this.acquisitionsSinceSweep = 0;
    for (const [key, scope] of this.scopes) {
      // Sorted by expiry: the last lease lapses last.
      const last = scope.expiries.length - 1;
      if (last < scope.head || scope.expiries[last]! <= now) this.scopes.delete(key);
    }
  }

  async close(): Promise<void> {
    this.scopes.clear();
  }
}

function ownIdOf(leaseId: string): number | undefined {
  if (!leaseId.startsWith(OWN_ID_PREFIX)) return undefined;
  const id = Number(leaseId.slice(OWN_ID_PREFIX.length));
  return Number.isSafeInteger(id) ? id : undefined;
}

/** Drops the lapsed slots before `head`. */
function compact(scope: Scope): void {
  scope.expiries.splice(0, scope.head);
  scope.units.splice(0, scope.head);
  scope.ids.splice(0, scope.head);
  scope.head = 0;
}

/** Keeps a scope's leases ordered by expiry; equal expiries keep their order of arrival. */
function insertByExpiry(scope: Scope, id: string | number, units: number, expiresAt: number): void {
  const { expiries } = scope;
  let at = expiries.length;
  while (at > scope.head && expiries[at - 1]! > expiresAt) at -= 1;
  if (at === expiries.length) {
    expiries.push(expiresAt);
    scope.units.push(units);
    scope.ids.push(id);
  } else {
    expiries.splice(at, 0, expiresAt);
    scope.units.splice(at, 0, units);
    scope.ids.splice(at, 0, id);
  }
  scope.held += units;
}
