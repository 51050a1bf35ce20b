import type { RequestHandler, Response } from 'express';
import type { Clock } from '../shared/clock';
import { type RateLimiter, setRateLimitHeaders } from './rate-limiter';

/**
 * Every authenticated client response carries the key's rate-limit state. The limiter sets it
 * when it counts the request; responses that end before that (400/403/404, replays) look it up
 * on the way out. Looking up only then saves a limiter round trip (Redis) on every success.
 */
export function rateLimitHeaders(limiter: RateLimiter, clock: Clock): RequestHandler {
  return (_req, res, next) => {
    const key = res.locals.apiKey;
    if (key) {
      res.locals.addRateLimitHeaders = async () => {
        if (!res.getHeader('RateLimit')) setRateLimitHeaders(res, await limiter.peek(key.id, key.rate_limit_rpm, clock.now()));
      };
    }
    next();
  };
}

/** Adds the headers when the request did not reach the limiter; never fails the response. */
export async function ensureRateLimitHeaders(res: Response): Promise<void> {
  await res.locals.addRateLimitHeaders?.().catch(() => undefined);
}
