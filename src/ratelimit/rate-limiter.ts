import type { Response } from 'express';

/** Result of one rate-limit check for a key. */
export interface RateLimitDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the oldest counted request leaves the window (0 when none is counted). */
  resetSeconds: number;
}

/**
 * Requests-per-minute limiter. Exact: at most `limit` requests in any rolling 60 s
 * (sliding-window log). Exact across replicas on Redis or SQL; in memory, exact on one instance.
 */
export interface RateLimiter {
  /** Counts the request when allowed. */
  consume(keyId: string, limit: number, now: number): Promise<RateLimitDecision>;
  /** The state without counting anything, for headers on responses refused earlier. */
  peek(keyId: string, limit: number, now: number): Promise<RateLimitDecision>;
  close(): Promise<void>;
}

export const WINDOW_MS = 60_000;

/** The decision from a window holding `count` requests, whose next slot frees at `freesAt` (see LeaseRateLimiter). */
export function decisionFromWindow(limit: number, count: number, freesAt: number | undefined, now: number, allowed: boolean): RateLimitDecision {
  const resetSeconds = freesAt === undefined ? 0 : Math.max(1, Math.ceil((freesAt - now) / 1000));
  return { allowed, limit, remaining: Math.max(0, limit - count), resetSeconds };
}

/** IETF draft (httpapi-ratelimit-headers) fields plus the widespread X-RateLimit-* trio. */
export function setRateLimitHeaders(res: Response, decision: RateLimitDecision): void {
  res.setHeader('RateLimit-Policy', `"rpm";q=${decision.limit};w=60`);
  res.setHeader('RateLimit', `"rpm";r=${decision.remaining};t=${decision.resetSeconds}`);
  res.setHeader('X-RateLimit-Limit', String(decision.limit));
  res.setHeader('X-RateLimit-Remaining', String(decision.remaining));
  res.setHeader('X-RateLimit-Reset', String(decision.resetSeconds));
}
