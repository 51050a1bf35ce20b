import type { Principal } from '../auth/principal';

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
      /** x-rate-limited operations: adds rate-limit headers to a response that did not reach the limiter. */
      addRateLimitHeaders?: () => Promise<void>;
    }
  }
}

export {};
