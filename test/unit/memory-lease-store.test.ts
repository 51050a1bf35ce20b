import { MemoryLeaseStore } from '../../src/leases/memory-lease-store';
import { leaseStoreContract } from '../helpers/lease-store-contract';

describe('memory lease store', () => {
  leaseStoreContract(async () => {
    const store = new MemoryLeaseStore();
    return { a: store, b: store, concurrent: [store], cleanup: () => store.close() };
  });
});
