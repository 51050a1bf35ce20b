import { Readable } from 'node:stream';
import { imageStoreProbe, REMOTE_PROBE_CACHE_MS } from '../../src/health/readiness';
import type { ImageStore } from '../../src/images/image-store';
import { TestClock } from '../helpers/test-clock';

function storeWith(check?: ImageStore['check']): ImageStore {
  return {
    description: 'test store',
    put: async () => undefined,
    read: async () => Readable.from([]),
    delete: async () => undefined,
    close: async () => undefined,
    ...(check ? { check } : {}),
  };
}

describe("the image store's readiness probe", () => {
  it('is none for a store without a check (a directory)', () => {
    expect(imageStoreProbe(storeWith(), new TestClock())).toBeUndefined();
  });

  it('asks the store once per few seconds, and reuses the answer, failure included, in between', async () => {
    const clock = new TestClock();
    let calls = 0;
    let failing = true;
    const probe = imageStoreProbe(
      storeWith(async () => {
        calls += 1;
        if (failing) throw new Error('connect ECONNREFUSED');
      }),
      clock,
    )!;
    expect(probe.dependency).toBe('image_store');
    await expect(probe.check()).rejects.toThrow('ECONNREFUSED');
    failing = false;
    await expect(probe.check()).rejects.toThrow('ECONNREFUSED');
    expect(calls).toBe(1);
    clock.advanceMs(REMOTE_PROBE_CACHE_MS);
    await expect(probe.check()).resolves.toBeUndefined();
    await expect(probe.check()).resolves.toBeUndefined();
    expect(calls).toBe(2);
  });

  it('bounds the check: the signal it gets aborts after the timeout', async () => {
    const probe = imageStoreProbe(
      storeWith((signal) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)))),
      new TestClock(),
      { timeoutMs: 50 },
    )!;
    await expect(probe.check()).rejects.toMatchObject({ name: 'TimeoutError' });
  });
});
