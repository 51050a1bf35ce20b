import type { LeaseClaim, LeaseScope, LeaseStore } from '../../src/leases/lease-store';

/**
 * Two handles on one store, standing for two replicas (memory: one object for both). `concurrent`:
 * the handles that may wait on each other from one process (not two SQLite connections: a
 * synchronous driver's busy wait would block the very transaction it waits for).
 */
export type OpenLeaseStores = () => Promise<{ a: LeaseStore; b: LeaseStore; concurrent: LeaseStore[]; cleanup(): Promise<void> }>;

const T0 = 1_700_000_000_000;
const scope = (name: string, owner = 'owner:1'): LeaseScope => ({ owner, name });
const claim = (name: string, limit: number | null, units: number, expiresAt: number, reportFreesAt?: boolean): LeaseClaim => ({
  scope: scope(name),
  limit,
  units,
  expiresAt,
  ...(reportFreesAt ? { reportFreesAt } : {}),
});

/**
 * The semantics every lease store shares (memory, SQL, Redis), checked on each: what a claim is
 * granted, what a refusal reports, how leases lapse, are released and renewed.
 */
export function leaseStoreContract(open: OpenLeaseStores): void {
  let stores: Awaited<ReturnType<OpenLeaseStores>>;
  beforeEach(async () => {
    stores = await open();
  });
  afterEach(() => stores.cleanup());

  it('grants up to the limit, then refuses with when the unit making room lapses; the other replica sees the same scope', async () => {
    const { a, b } = stores;
    for (let i = 0; i < 3; i += 1) {
      const taken = await (i % 2 ? b : a).acquire([claim('slots', 3, 1, T0 + 10_000 * (i + 1))], T0);
      expect(taken).toMatchObject({ granted: true, states: [{ held: i + 1 }] });
    }
    expect(await b.acquire([claim('slots', 3, 1, T0 + 99_000)], T0)).toEqual({ granted: false, refusedClaim: 0, states: [{ held: 3, freesAt: T0 + 10_000 }] });
    // With the limit lowered to 2, room comes back only when two have lapsed.
    expect(await a.acquire([claim('slots', 2, 1, T0 + 99_000)], T0)).toMatchObject({ granted: false, states: [{ held: 3, freesAt: T0 + 20_000 }] });
    // A lease counts until its expiry, not at it.
    expect(await a.acquire([claim('slots', 3, 1, T0 + 99_000)], T0 + 9_999)).toMatchObject({ granted: false });
    expect(await a.acquire([claim('slots', 3, 1, T0 + 99_000)], T0 + 10_000)).toMatchObject({ granted: true, states: [{ held: 3 }] });
  });

  it('weighs units: a claim fits only whole, and room for it comes when enough units have lapsed', async () => {
    const { a } = stores;
    expect(await a.acquire([claim('images', 10, 4, T0 + 1_000)], T0)).toMatchObject({ granted: true });
    expect(await a.acquire([claim('images', 10, 4, T0 + 2_000)], T0)).toMatchObject({ granted: true });
    // 8 held, 3 more asked for: one unit must lapse, the oldest (T0 + 1000).
    expect(await a.acquire([claim('images', 10, 3, T0 + 3_000)], T0)).toEqual({ granted: false, refusedClaim: 0, states: [{ held: 8, freesAt: T0 + 1_000 }] });
    // 7 asked for: five units must lapse, the fifth of them expires at T0 + 2000.
    expect(await a.acquire([claim('images', 10, 7, T0 + 3_000)], T0)).toMatchObject({ states: [{ freesAt: T0 + 2_000 }] });
    // More than the limit never fits, and no unit held brings room.
    expect(await a.acquire([claim('images', 10, 11, T0 + 3_000)], T0)).toEqual({ granted: false, refusedClaim: 0, states: [{ held: 8 }] });
    expect(await a.acquire([claim('images', 10, 2, T0 + 3_000)], T0)).toMatchObject({ granted: true, states: [{ held: 10 }] });
  });

  it('is all or nothing across claims, names the first that does not fit, reports freesAt where asked', async () => {
    const { a } = stores;
    const claims = (expiresAt: number) => [claim('concurrency', 2, 1, expiresAt), claim('calls', null, 1, expiresAt, true), claim('images', 5, 3, expiresAt)];
    const first = await a.acquire(claims(T0 + 5_000), T0, 'lease_first');
    expect(first).toEqual({ granted: true, leaseId: 'lease_first', states: [{ held: 1 }, { held: 1, freesAt: T0 + 5_000 }, { held: 3 }] });
    const second = await a.acquire(claims(T0 + 6_000), T0);
    expect(second).toEqual({ granted: false, refusedClaim: 2, states: [{ held: 1 }, { held: 1 }, { held: 3, freesAt: T0 + 5_000 }] });
    // Nothing of the refused acquisition was taken.
    expect(await a.check([claim('concurrency', 2, 0, 0), claim('calls', null, 0, 0), claim('images', 5, 0, 0)], T0)).toEqual([
      { held: 1 },
      { held: 1 },
      { held: 3 },
    ]);
  });

  it('a limit-0 claim of no units refuses while any lease of its scope lives, until the longest lapses (a cool-down)', async () => {
    const { a, b } = stores;
    const coolDown = claim('cooldown', 0, 0, T0);
    expect(await a.acquire([coolDown], T0)).toMatchObject({ granted: true, states: [{ held: 0 }] });
    await a.acquire([claim('cooldown', null, 1, T0 + 30_000)], T0);
    await b.acquire([claim('cooldown', null, 1, T0 + 5_000)], T0);
    expect(await b.acquire([coolDown, claim('slots', 5, 1, T0 + 1_000)], T0)).toEqual({
      granted: false,
      refusedClaim: 0,
      states: [{ held: 2, freesAt: T0 + 30_000 }, { held: 0 }],
    });
    expect(await b.check([{ ...coolDown, reportFreesAt: true }], T0 + 6_000)).toEqual([{ held: 1, freesAt: T0 + 30_000 }]);
    expect(await b.acquire([coolDown], T0 + 30_000)).toMatchObject({ granted: true });
  });

  it('check takes nothing and reports as acquire would', async () => {
    const { a } = stores;
    expect(await a.check([claim('rpm', 2, 1, T0 + 60_000, true)], T0)).toEqual([{ held: 0 }]);
    await a.acquire([claim('rpm', 2, 1, T0 + 60_000)], T0);
    expect(await a.check([claim('rpm', 2, 1, T0 + 61_000, true)], T0 + 1_000)).toEqual([{ held: 1, freesAt: T0 + 60_000 }]);
    expect(await a.check([claim('rpm', 2, 1, T0 + 61_000, true)], T0 + 1_000)).toEqual([{ held: 1, freesAt: T0 + 60_000 }]);
  });

  it('release frees at once; renew moves a held lease (into the past: frees it) and never brings back one gone', async () => {
    const { a, b } = stores;
    const slot = claim('slot', 1, 1, T0 + 1_000);
    const taken = await a.acquire([slot], T0);
    if (!taken.granted) throw new Error('refused');
    const ref = { scope: slot.scope, leaseId: taken.leaseId, units: 1 };
    await b.renew([ref], T0 + 50_000, T0 + 500);
    expect(await b.acquire([slot], T0 + 10_000)).toMatchObject({ granted: false, states: [{ freesAt: T0 + 50_000 }] });
    await a.release([ref]);
    const next = await b.acquire([slot], T0 + 10_000, 'holder-b');
    expect(next).toMatchObject({ granted: true, leaseId: 'holder-b' });
    // The released lease stays gone; the holder's own lease ends when moved into the past.
    await a.renew([ref], T0 + 90_000, T0 + 10_000);
    await b.renew([{ scope: slot.scope, leaseId: 'holder-b', units: 1 }], T0 + 10_000, T0 + 10_001);
    expect(await a.acquire([slot], T0 + 10_001)).toMatchObject({ granted: true });
  });

  it('releases and renews every unit of a lease of many, and only that scope', async () => {
    const { a } = stores;
    const taken = await a.acquire([claim('concurrency', null, 1, T0 + 7_000), claim('images', null, 3, T0 + 1_000)], T0);
    if (!taken.granted) throw new Error('refused');
    await a.renew([{ scope: scope('images'), leaseId: taken.leaseId, units: 3 }], T0 + 9_000, T0);
    expect(await a.check([claim('concurrency', null, 0, 0), claim('images', null, 0, 0, true)], T0 + 5_000)).toEqual([
      { held: 1 },
      { held: 3, freesAt: T0 + 9_000 },
    ]);
    await a.release([{ scope: scope('images'), leaseId: taken.leaseId, units: 3 }]);
    expect(await a.check([claim('concurrency', null, 0, 0), claim('images', null, 0, 0)], T0 + 5_000)).toEqual([{ held: 1 }, { held: 0 }]);
  });

  it('owners and scopes are independent', async () => {
    const { a } = stores;
    expect(await a.acquire([{ ...claim('x', 1, 1, T0 + 1_000), scope: scope('x', 'owner:a') }], T0)).toMatchObject({ granted: true });
    expect(await a.acquire([{ ...claim('x', 1, 1, T0 + 1_000), scope: scope('x', 'owner:b') }], T0)).toMatchObject({ granted: true });
    expect(await a.acquire([{ ...claim('y', 1, 1, T0 + 1_000), scope: scope('y', 'owner:a') }], T0)).toMatchObject({ granted: true });
    expect(await a.acquire([{ ...claim('x', 1, 1, T0 + 1_000), scope: scope('x', 'owner:a') }], T0)).toMatchObject({ granted: false });
  });

  it('is exact under 60 concurrent acquisitions', async () => {
    const { a, concurrent } = stores;
    const results = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        concurrent[i % concurrent.length]!.acquire([claim('burst', 20, 1, T0 + 60_000), claim('images', 45, 2, T0 + 60_000)], T0),
      ),
    );
    expect(results.filter((r) => r.granted)).toHaveLength(20);
    const refusals = results.filter((r) => !r.granted);
    // 20 granted: 20 slots and 40 images held; the others refused on the first claim.
    expect(refusals.every((r) => !r.granted && r.refusedClaim === 0)).toBe(true);
    expect(await a.check([claim('burst', 20, 0, 0), claim('images', 45, 0, 0)], T0)).toEqual([{ held: 20 }, { held: 40 }]);
  });
}
