import type { LeaseClaim, LeaseStore } from '../leases/lease-store';
import { type RateLimitDecision, type RateLimiter, WINDOW_MS, decisionFromWindow } from './rate-limiter';

/**
 * Requests per minute as leases: a counted request is a lease of the key's `rpm` scope, never
 * released, lapsing a minute after it was taken, so the scope holds exactly the requests of the
 * last minute. One store call per check (one Redis script, or one SQL transaction).
 */
export class LeaseRateLimiter implements RateLimiter {
  constructor(private readonly store: LeaseStore) {}

  /** The reset is when the request whose lapse frees the next slot leaves the window: the oldest one, or when full the one `limit` back. */
  private claim(keyId: string, limit: number, now: number): LeaseClaim {
    return { scope: { owner: `key:${keyId}`, name: 'rpm' }, limit, units: 1, expiresAt: now + WINDOW_MS, reportFreesAt: true };
  }

  async consume(keyId: string, limit: number, now: number): Promise<RateLimitDecision> {
    const acquisition = await this.store.acquire([this.claim(keyId, limit, now)], now);
    const [state] = acquisition.states;
    return decisionFromWindow(limit, state!.held, state!.freesAt, now, acquisition.granted);
  }

  async peek(keyId: string, limit: number, now: number): Promise<RateLimitDecision> {
    const [state] = await this.store.check([this.claim(keyId, limit, now)], now);
    return decisionFromWindow(limit, state!.held, state!.freesAt, now, true);
  }

  close(): Promise<void> {
    return this.store.close();
  }
}
