import type { Principal } from '../auth/principal';
import type { RateLimitHolder } from '../ratelimit/rate-limiter';

declare global {
  namespace Express {
    interface Locals {
      requestId: string;
      /** Set by the operation's guard (spec-router.ts). */
      principal?: Principal;
      /** Query and path parameters converted to the spec's types (spec-router.ts). */
      parsedQuery?: Record<string, unknown>;
      parsedParams?: Record<string, unknown>;
      /** A HEAD request shown to the validator as GET. */
      headRequest?: boolean;
      /** x-rate-limited operations: where the request's count is recorded for its rate-limit headers (rate-limit-headers.middleware.ts). */
      rateLimit?: RateLimitHolder;
      /** The request's body limit, for a body still arriving when it is answered (body-deadline.ts, unread-body.ts). */
      bodyLimitBytes?: number;
    }
  }
}

export {};
