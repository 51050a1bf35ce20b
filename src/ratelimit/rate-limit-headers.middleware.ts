import type { RequestHandler, Response } from 'express';
import type { Clock } from '../shared/clock';
import { type RateLimiter, setRateLimitHeaders } from './rate-limiter';

/**
 * Every response of an `x-rate-limited` operation carries the key's rate-limit state. The
 * service returns the limiter's decision with its result (or its error) and spec-router.ts sets
 * the headers from it; responses that end before the limiter (400/403/404, replays) look it up
 * on the way out. Looking up only then saves a limiter round trip (Redis) on every success.
 */
export function rateLimitHeaders(limiter: RateLimiter, clock: Clock): RequestHandler {
  return (_req, res, next) => {
    const principal = res.locals.principal;
    if (principal?.kind === 'client') {
      const { key } = principal;
      res.locals.addRateLimitHeaders = async () => {
        if (!res.getHeader('RateLimit')) setRateLimitHeaders(res, await limiter.peek(key.id, key.rateLimitRpm, clock.now()));
      };
    }
    next();
  };
}

/** Adds the headers when the request did not reach the limiter; never fails the response. */
export async function ensureRateLimitHeaders(res: Response): Promise<void> {
  await res.locals.addRateLimitHeaders?.().catch(() => undefined);
}
