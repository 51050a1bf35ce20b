import type { RequestHandler } from 'express';
import type { Clock } from '../shared/clock';
import { type RateLimiter, setRateLimitHeaders } from './rate-limiter';

/**
 * Puts the key's current rate-limit state on every authenticated client response, including
 * ones refused before the limiter counts (400/403/404). The limiter overwrites it when it counts.
 */
export function rateLimitHeaders(limiter: RateLimiter, clock: Clock): RequestHandler {
  return async (_req, res, next) => {
    const key = res.locals.apiKey;
    if (key) setRateLimitHeaders(res, await limiter.peek(key.id, key.rate_limit_rpm, clock.now()));
    next();
  };
}
