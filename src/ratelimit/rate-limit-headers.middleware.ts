import type { RequestHandler, Response } from 'express';
import type { Clock } from '../shared/clock';
import type { RateLimitDecision, RateLimiter } from './rate-limiter';

/** IETF draft (httpapi-ratelimit-headers) fields plus the widespread X-RateLimit-* trio. */
function setRateLimitHeaders(res: Response, decision: RateLimitDecision): void {
  res.setHeader('RateLimit-Policy', `"rpm";q=${decision.limit};w=60`);
  res.setHeader('RateLimit', `"rpm";r=${decision.remaining};t=${decision.resetSeconds}`);
  res.setHeader('X-RateLimit-Limit', String(decision.limit));
  res.setHeader('X-RateLimit-Remaining', String(decision.remaining));
  res.setHeader('X-RateLimit-Reset', String(decision.resetSeconds));
}

/** Responses ended before the count whose rate-limit state is not looked up (see below). */
const UNLOOKED_STATUSES = new Set([408, 503]);

/**
 * The x-rate-limited layer, the one writer of the rate-limit headers: every response of such an
 * operation, success or error, carries the key's rate-limit state, set as the response ends. The
 * handler gets a holder (`res.locals.rateLimit`) in which the request's count records its decision.
 * A response that ends without one (refused before the count: 400, 403, 404, 409, 422; an idempotent
 * replay) looks the state up then, counting nothing: looking up only then saves a limiter round trip
 * (Redis) on every success. Not looked up for: a 503 without a count, a failing dependency (the
 * limiter's store or the database), which asked again would double the wait; a 408, the body
 * deadline's (body-deadline.ts), which cuts a slow client off as it is.
 */
export function rateLimitHeaders(limiter: RateLimiter, clock: Clock): RequestHandler {
  return (_req, res, next) => {
    let counted: RateLimitDecision | undefined;
    res.locals.rateLimit = {
      record: (decision) => {
        counted = decision;
      },
    };
    const principal = res.locals.principal;
    const key = principal?.kind === 'client' ? principal.key : undefined;
    const end = res.end.bind(res) as (...args: unknown[]) => Response;
    res.end = ((...args: unknown[]) => {
      if (res.headersSent) return end(...args);
      if (counted) {
        setRateLimitHeaders(res, counted);
        return end(...args);
      }
      if (!key || UNLOOKED_STATUSES.has(res.statusCode)) return end(...args);
      // The headers never fail the response: without an answer from the limiter it goes without them.
      limiter
        .peek(key.id, key.rateLimitRpm, clock.now())
        .then(
          (decision) => {
            if (!res.headersSent) setRateLimitHeaders(res, decision);
          },
          () => undefined,
        )
        .then(() => end(...args))
        .catch(() => res.destroy());
      return res;
    }) as Response['end'];
    next();
  };
}
