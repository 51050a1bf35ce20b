import { type RateLimitDecision, type RateLimiter, WINDOW_MS, decisionFromWindow, freesNextIndex } from './rate-limiter';

/**
 * Sliding-window log in process memory: per key, the times of the requests counted in the
 * last minute, oldest first. Exact for one process; replicas need the Redis or SQL limiter.
 */
export class MemoryRateLimiter implements RateLimiter {
  private readonly windows = new Map<string, number[]>();
  private checksSinceSweep = 0;

  private window(keyId: string, now: number): number[] {
    const times = this.windows.get(keyId) ?? [];
    let expired = 0;
    while (expired < times.length && (times[expired] as number) <= now - WINDOW_MS) expired += 1;
    if (expired > 0) times.splice(0, expired);
    return times;
  }

  private decide(times: number[], limit: number, now: number, allowed: boolean): RateLimitDecision {
    return decisionFromWindow(limit, times.length, times[freesNextIndex(limit, times.length)], now, allowed);
  }

  async consume(keyId: string, limit: number, now: number): Promise<RateLimitDecision> {
    this.sweepNowAndThen(now);
    const times = this.window(keyId, now);
    if (times.length >= limit) return this.decide(times, limit, now, false);
    times.push(now);
    this.windows.set(keyId, times);
    return this.decide(times, limit, now, true);
  }

  async peek(keyId: string, limit: number, now: number): Promise<RateLimitDecision> {
    return this.decide(this.window(keyId, now), limit, now, true);
  }

  /** Drops idle keys every 10,000 checks so memory follows active keys, not all keys ever seen. */
  private sweepNowAndThen(now: number): void {
    this.checksSinceSweep += 1;
    if (this.checksSinceSweep < 10_000) return;
    this.checksSinceSweep = 0;
    for (const [keyId, times] of this.windows) {
      const newest = times[times.length - 1];
      if (newest === undefined || newest <= now - WINDOW_MS) this.windows.delete(keyId);
    }
  }

  async close(): Promise<void> {
    this.windows.clear();
  }
}
