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
  record(decision: RateLimitDecision): void;
}

/**
 * Requests-per-minute limiter. Exact: at most `limit` requests in any rolling 60 s
 * (sliding-window log). The in-memory implementation is exact on one instance.
 */
export interface RateLimiter {
  /** Counts the request when allowed. */
  consume(keyId: string, limit: number, now: number): Promise<RateLimitDecision>;
  /** The state without counting anything, for headers on responses refused earlier. */
  peek(keyId: string, limit: number, now: number): Promise<RateLimitDecision>;
  close(): Promise<void>;
}

export const WINDOW_MS = 60_000;

/**
 * The decision from a window holding `count` requests. `freesNextAt` is the time of the request
 * whose expiry frees the next slot: the oldest one, or when full the one `limit` back.
 */
export function decisionFromWindow(limit: number, count: number, freesNextAt: number | undefined, now: number, allowed: boolean): RateLimitDecision {
  const resetSeconds = freesNextAt === undefined ? 0 : Math.max(1, Math.ceil((freesNextAt + WINDOW_MS - now) / 1000));
  return { allowed, limit, remaining: Math.max(0, limit - count), resetSeconds };
}

/** Index, oldest first, of the request whose expiry frees the next slot. */
export function freesNextIndex(limit: number, count: number): number {
  return count >= limit ? count - limit : 0;
}
