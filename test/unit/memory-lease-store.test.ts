import { MemoryLeaseStore } from '../../src/leases/memory-lease-store';
import { leaseStoreContract } from '../helpers/lease-store-contract';

describe('memory lease store', () => {
  leaseStoreContract(async () => {
    const store = new MemoryLeaseStore();
    return { a: store, b: store, concurrent: [store], cleanup: () => store.close() };
  });
});

describe('memory lease store: its own lease ids and its compaction', () => {
  const scope = { owner: 'key:k', name: 'rpm' };
  const claim = (expiresAt: number, limit: number | null = null) => ({ scope, limit, units: 1, expiresAt, reportFreesAt: true });

  it('releases and renews a lease taken without an id by the id it answered', async () => {
    const store = new MemoryLeaseStore();
    const first = await store.acquire([claim(1_000)], 0);
    const second = await store.acquire([claim(2_000)], 0);
    if (!first.granted || !second.granted) throw new Error('refused');
    expect(first.leaseId).not.toBe(second.leaseId);
    await store.renew([{ scope, leaseId: first.leaseId, units: 1 }], 3_000);
    // Renewed past the second: the second now lapses first.
    expect(await store.check([claim(0, 2)], 1_500)).toEqual([{ held: 2, freesAt: 2_000 }]);
    await store.release([{ scope, leaseId: second.leaseId, units: 1 }]);
    expect(await store.check([claim(0, 1)], 1_500)).toEqual([{ held: 1, freesAt: 3_000 }]);
  });

  it('tells a caller id that looks like its own apart from its own', async () => {
    const store = new MemoryLeaseStore();
    const own = await store.acquire([claim(1_000)], 0);
    await store.acquire([claim(1_000)], 0, '~1');
    if (!own.granted) throw new Error('refused');
    expect(own.leaseId).toBe('~1');
    await store.release([{ scope, leaseId: '~1', units: 1 }]);
    await store.release([{ scope, leaseId: '~1', units: 1 }]);
    expect(await store.check([claim(0)], 0)).toEqual([{ held: 0 }]);
  });

  it('keeps counting and ordering exactly while lapsed leases are dropped and the arrays compacted', async () => {
    const store = new MemoryLeaseStore();
    const limit = 10;
    const taken: number[] = [];
    for (let now = 0; now < 5_000; now += 7) {
      const acquisition = await store.acquire([claim(now + 60, limit)], now);
      const live = taken.filter((expiresAt) => expiresAt > now);
      expect(acquisition.granted).toBe(live.length < limit);
      if (acquisition.granted) taken.push(now + 60);
      const held = taken.filter((expiresAt) => expiresAt > now);
      expect(acquisition.states[0]!.held).toBe(held.length);
      expect(acquisition.states[0]!.freesAt).toBe(held.length >= limit ? held[held.length - limit] : held[0]);
    }
  });
});
