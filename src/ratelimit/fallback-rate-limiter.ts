import type { Logger } from 'pino';
import { DependencyUnavailableError } from '../errors/dependency-errors';
import type { RateLimitDecision, RateLimiter } from './rate-limiter';

/**
 * RATE_LIMIT_REDIS_FALLBACK=sql: while Redis fails, requests are counted in the SQL limiter
 * instead, so the limit still holds (never lifted) and traffic keeps flowing. The two stores keep
 * separate windows: in the minute after a switch a key can get up to its limit from each, at most
 * twice its RPM. Each switch is logged.
 */
export class FallbackRateLimiter implements RateLimiter {
  private onFallback = false;

  constructor(
    private readonly primary: RateLimiter,
    private readonly fallback: RateLimiter,
    private readonly logger: Logger,
  ) {}

  private async either(call: (limiter: RateLimiter) => Promise<RateLimitDecision>): Promise<RateLimitDecision> {
    try {
      const decision = await call(this.primary);
      if (this.onFallback) {
        this.onFallback = false;
        this.logger.warn('Redis is back: rate limits are counted in Redis again');
      }
      return decision;
    } catch (error) {
      if (!(error instanceof DependencyUnavailableError)) throw error;
      if (!this.onFallback) {
        this.onFallback = true;
        this.logger.warn('Redis is unavailable: rate limits are counted in the SQL limiter until it returns');
      }
      return call(this.fallback);
    }
  }

  consume(keyId: string, limit: number, now: number): Promise<RateLimitDecision> {
    return this.either((limiter) => limiter.consume(keyId, limit, now));
  }

  peek(keyId: string, limit: number, now: number): Promise<RateLimitDecision> {
    return this.either((limiter) => limiter.peek(keyId, limit, now));
  }

  async close(): Promise<void> {
    await Promise.all([this.primary.close(), this.fallback.close()]);
  }
}
