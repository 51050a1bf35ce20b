import { MemoryRateLimiter } from '../../src/ratelimit/memory-rate-limiter';

describe('MemoryRateLimiter (sliding window log)', () => {
  it('allows exactly `limit` in any rolling minute and frees slots as requests age out', async () => {
    const limiter = new MemoryRateLimiter();
    const t0 = 1_000_000;
    for (let i = 0; i < 3; i += 1) expect((await limiter.consume('k', 3, t0 + i * 10_000)).allowed).toBe(true);
    const refused = await limiter.consume('k', 3, t0 + 30_000);
    expect(refused).toMatchObject({ allowed: false, remaining: 0, resetSeconds: 30 });
    // The first request leaves the window at t0 + 60 s: exactly one slot frees.
    expect((await limiter.consume('k', 3, t0 + 59_999)).allowed).toBe(false);
    expect((await limiter.consume('k', 3, t0 + 60_000)).allowed).toBe(true);
    expect((await limiter.consume('k', 3, t0 + 60_001)).allowed).toBe(false);
  });

  it('keeps keys apart and peek counts nothing', async () => {
    const limiter = new MemoryRateLimiter();
    expect(await limiter.peek('a', 2, 0)).toMatchObject({ remaining: 2, resetSeconds: 0 });
    await limiter.consume('a', 2, 0);
    expect(await limiter.peek('a', 2, 1000)).toMatchObject({ remaining: 1, resetSeconds: 59 });
    expect(await limiter.peek('a', 2, 1000)).toMatchObject({ remaining: 1 });
    expect((await limiter.consume('b', 1, 0)).allowed).toBe(true);
    expect((await limiter.consume('b', 1, 0)).allowed).toBe(false);
    expect((await limiter.consume('a', 2, 0)).allowed).toBe(true);
  });

  it('a lowered limit applies at once', async () => {
    const limiter = new MemoryRateLimiter();
    for (let i = 0; i < 5; i += 1) await limiter.consume('k', 10, i);
    expect((await limiter.consume('k', 5, 10)).allowed).toBe(false);
  });
});
