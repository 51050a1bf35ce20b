/** Result of one rate-limit check for a key. */
export interface RateLimitDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the oldest counted request leaves the window (0 when none is counted). */
  resetSeconds: number;
}

/**
 * Where one request's count is kept for its response's rate-limit headers: the x-rate-limited layer
 * (rate-limit-headers.middleware.ts) hands it to the handler, the count records its decision in it,
 * and the layer alone writes the headers from it.
 */
export interface RateLimitHolder {
  /** `scope`: the key's own limit, or its project's (counted across the project's keys). */
  record(decision: RateLimitDecision, scope?: RateLimitScope): void;
}

export type RateLimitScope = 'key' | 'project';

/** `1 request per minute`, `30 requests per minute`: the refusals' wording. */
export function requestsPerMinute(limit: number): string {
  return `${limit} request${limit === 1 ? '' : 's'} per minute`;
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
