import type { Clock } from '../../shared/clock';

export type BreakerState = 'closed' | 'open' | 'half_open';

/**
 * Opens after `threshold` consecutive provider failures; after `cooldownMs` lets one probe
 * through (half-open): its success closes the breaker, its failure opens it again.
 */
export class CircuitBreaker {
  private failures = 0;
  private openedAt: number | undefined;
  private probeInFlight = false;

  constructor(
    private readonly threshold: number,
    private readonly cooldownMs: number,
    private readonly clock: Clock,
  ) {}

  get state(): BreakerState {
    if (this.openedAt === undefined) return 'closed';
    return this.clock.now() - this.openedAt >= this.cooldownMs ? 'half_open' : 'open';
  }

  /** Milliseconds until a probe is allowed (0 when calls may go through). */
  retryAfterMs(): number {
    if (this.openedAt === undefined) return 0;
    return Math.max(0, this.openedAt + this.cooldownMs - this.clock.now());
  }

  /** True when a call may go to the provider now; in half-open state only one probe at a time. */
  tryAcquire(): boolean {
    const state = this.state;
    if (state === 'closed') return true;
    if (state === 'open' || this.probeInFlight) return false;
    this.probeInFlight = true;
    return true;
  }

  onSuccess(): void {
    this.failures = 0;
    this.openedAt = undefined;
    this.probeInFlight = false;
  }

  onFailure(): void {
    this.failures += 1;
    if (this.probeInFlight || this.failures >= this.threshold) this.openedAt = this.clock.now();
    this.probeInFlight = false;
  }

  /** A call that ended for a reason that says nothing about the provider (e.g. content refusal). */
  onNeutral(): void {
    this.probeInFlight = false;
  }
}
