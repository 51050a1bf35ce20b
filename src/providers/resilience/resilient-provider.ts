import { setTimeout as sleep } from 'node:timers/promises';
import { ApiError } from '../../errors/api-error';
import type { Clock } from '../../shared/clock';
import type { ImageProvider, ProviderImage, ProviderRequest } from '../provider';
import { UpstreamError } from '../upstream-errors';
import { type BreakerState, CircuitBreaker } from './circuit-breaker';
import { ConcurrencyLimit } from './concurrency-limit';
import { ProviderStats } from './provider-stats';

export interface ResilienceSettings {
  /** Overall deadline of one generation at this provider, retries included. */
  timeoutMs: number;
  /** Tries in all, on retryable (busy) answers only. */
  maxAttempts: number;
  retryBaseDelayMs: number;
  maxConcurrent: number;
  breakerThreshold: number;
  breakerCooldownMs: number;
}

export interface ProviderHealth {
  circuit: BreakerState;
  in_flight: number;
  calls: number;
  error_rate: number;
  latency_ms: { p50: number | null; p95: number | null; p99: number | null };
}

/**
 * Wraps a provider with its deadline, bounded retries with jitter, a concurrency cap and a
 * circuit breaker. Providers themselves only speak their wire format.
 */
export class ResilientProvider implements ImageProvider {
  readonly name: string;
  private readonly breaker: CircuitBreaker;
  private readonly slots: ConcurrencyLimit;
  private readonly stats = new ProviderStats();

  constructor(
    private readonly inner: ImageProvider,
    private readonly settings: ResilienceSettings,
    private readonly clock: Clock,
  ) {
    this.name = inner.name;
    this.breaker = new CircuitBreaker(settings.breakerThreshold, settings.breakerCooldownMs, clock);
    this.slots = new ConcurrencyLimit(settings.maxConcurrent);
  }

  isConfigured(transport?: string): boolean {
    return this.inner.isConfigured(transport);
  }

  health(): ProviderHealth {
    return { circuit: this.breaker.state, in_flight: this.slots.inFlight, ...this.stats.snapshot() };
  }

  async generate(request: ProviderRequest, clientSignal: AbortSignal): Promise<ProviderImage[]> {
    if (!this.breaker.tryAcquire()) {
      const seconds = Math.max(1, Math.ceil(this.breaker.retryAfterMs() / 1000));
      throw new ApiError('provider_unavailable', `Provider ${this.name} is failing; calls are paused for ${seconds} s (circuit open).`, {
        headers: { 'Retry-After': String(seconds) },
      });
    }
    // One controller for "client gone or deadline passed" (cheaper per call than AbortSignal.timeout + any).
    const controller = new AbortController();
    const signal = controller.signal;
    let deadlinePassed = false;
    const deadline = setTimeout(() => {
      deadlinePassed = true;
      controller.abort(this.timeoutError());
    }, this.settings.timeoutMs);
    const onClientGone = () => controller.abort(clientSignal.reason);
    if (clientSignal.aborted) onClientGone();
    else clientSignal.addEventListener('abort', onClientGone, { once: true });
    const started = this.clock.now();
    let acquired = false;
    try {
      await this.slots.acquire(signal);
      acquired = true;
      const images = await this.withRetries(request, signal);
      this.breaker.onSuccess();
      this.stats.record(true, this.clock.now() - started);
      return images;
    } catch (error) {
      const failure = deadlinePassed && !clientSignal.aborted ? this.timeoutError() : error;
      const providerAtFault = failure instanceof UpstreamError ? failure.countsAgainstProvider : failure instanceof ApiError && failure.code === 'provider_timeout';
      if (providerAtFault) this.breaker.onFailure();
      else this.breaker.onNeutral();
      this.stats.record(!providerAtFault, this.clock.now() - started);
      throw failure;
    } finally {
      clearTimeout(deadline);
      clientSignal.removeEventListener('abort', onClientGone);
      if (acquired) this.slots.release();
    }
  }

  private timeoutError(): ApiError {
    return new ApiError('provider_timeout', `Provider ${this.name} did not answer within ${this.settings.timeoutMs / 1000} s.`);
  }

  private async withRetries(request: ProviderRequest, signal: AbortSignal): Promise<ProviderImage[]> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await this.inner.generate(request, signal);
      } catch (error) {
        const retryable = error instanceof UpstreamError && error.retryable;
        if (!retryable) throw error;
        if (attempt >= this.settings.maxAttempts) {
          throw new UpstreamError('provider_busy', `${error.message} (gave up after ${attempt} tries)`, false, {
            headers: { 'Retry-After': String(Math.max(1, Math.ceil((this.settings.retryBaseDelayMs * 2 ** attempt) / 1000))) },
          });
        }
        // Exponential backoff with full jitter in [0.5, 1.5) of the step.
        const step = this.settings.retryBaseDelayMs * 2 ** (attempt - 1);
        await sleep(step * (0.5 + Math.random()), undefined, { signal });
      }
    }
  }
}
