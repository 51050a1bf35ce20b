/**
 * Leases in scopes, the one model behind every shared limit: a scope holds leases, each of some
 * units, each lapsing at its expiry unless renewed; a claim is granted only while the scope's live
 * units plus the claim's stay within its limit. A sliding-window rate count is a lease never
 * released that lapses a window after it was taken; a concurrency slot is a lease released at the
 * end (and renewed while held); a cool-down is a lease nobody may claim past (limit 0).
 */
export interface LeaseScope {
  /**
   * What the limit belongs to (`key:<id>`, `channel:<id>`). Claims of one acquisition share it: it
   * is the unit of atomicity (one Redis Cluster slot, one PostgreSQL advisory lock).
   */
  owner: string;
  /** Which of the owner's limits (`rpm`, `concurrency`, `calls`, `images`, `cooldown`). */
  name: string;
}

export interface LeaseClaim {
  scope: LeaseScope;
  /** Most units the scope may hold; null counts the units without limiting them. */
  limit: number | null;
  /** Units to take (0: only checks the limit, takes nothing). */
  units: number;
  /** When the lease taken lapses (epoch ms). */
  expiresAt: number;
  /** Report `freesAt` for this claim even when nothing refuses it (rate-limit headers). */
  reportFreesAt?: boolean;
}

/** A scope's state after an acquisition or a check. */
export interface ScopeState {
  /** Live units in the scope (the claim's included when granted). */
  held: number;
  /**
   * When the scope has room for the claim's units again: the expiry of the unit, counted oldest
   * expiry first, whose lapse brings the scope under its limit (see freesAtIndex). Undefined when
   * the scope holds no such unit, or when it was not asked for.
   */
  freesAt?: number;
}

export type Acquisition =
  | { granted: true; leaseId: string; states: ScopeState[] }
  /** `refusedClaim`: index of the first claim that did not fit; nothing was taken. */
  | { granted: false; refusedClaim: number; states: ScopeState[] };

/** One lease in one scope, as release and renew need it. */
export interface LeaseRef {
  scope: LeaseScope;
  leaseId: string;
  units: number;
}

export interface LeaseStore {
  /**
   * All or nothing, atomically across every process sharing the store: when every claim fits (in
   * order), takes a lease of `leaseId` (a new id when omitted) in each claim's scope; else takes
   * nothing and names the first claim that did not fit. Expired leases are dropped first.
   */
  acquire(claims: readonly LeaseClaim[], now: number, leaseId?: string): Promise<Acquisition>;
  /** The claims' scopes as acquire would see them, taking nothing (freesAt only where asked for). */
  check(claims: readonly LeaseClaim[], now: number): Promise<ScopeState[]>;
  /** Gives leases back at once; one already gone stays gone. */
  release(leases: readonly LeaseRef[]): Promise<void>;
  /** Moves the expiry of leases still held to `expiresAt` (in the past: frees them); one already gone stays gone. */
  renew(leases: readonly LeaseRef[], expiresAt: number, now: number): Promise<void>;
  close(): Promise<void>;
}

/** `owner:name`: the scope's key in every store. */
export function scopeKey(scope: LeaseScope): string {
  return `${scope.owner}:${scope.name}`;
}

/**
 * Index (oldest expiry first, in units) of the unit whose lapse leaves room for `units` more under
 * `limit`; without a limit, the first unit to lapse.
 */
export function freesAtIndex(limit: number | null, held: number, units: number): number {
  return limit === null ? 0 : Math.max(0, held + units - limit - 1);
}

/** Whether `units` more fit in a scope holding `held`. */
export function fits(limit: number | null, held: number, units: number): boolean {
  return limit === null || held + units <= limit;
}

/** Whether acquire must report freesAt for claim `index` of an acquisition ending in `refusedClaim` (-1: granted). */
export function reportsFreesAt(claim: LeaseClaim, index: number, refusedClaim: number): boolean {
  return index === refusedClaim || (refusedClaim < 0 && claim.reportFreesAt === true);
}
