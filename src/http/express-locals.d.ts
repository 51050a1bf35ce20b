import type { ApiKeyRow } from '../keys/key.model';

declare global {
  namespace Express {
    interface Locals {
      requestId: string;
      /** The authenticated client key (client routes only). */
      apiKey?: ApiKeyRow;
      /** The authenticated service token's client id (internal API only). */
      serviceClientId?: string;
      /** Client routes: adds rate-limit headers to a response that did not reach the limiter. */
      addRateLimitHeaders?: () => Promise<void>;
    }
  }
}

export {};
