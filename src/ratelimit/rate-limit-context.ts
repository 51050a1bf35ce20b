import { AsyncLocalStorage } from 'node:async_hooks';
import type { RateLimitDecision, RateLimitHolder, RateLimitScope } from './rate-limiter';

/**
 * The request's rate-limit holder as a request-context value: the `x-rate-limited` layer creates it
 * (rate-limit-headers.middleware.ts), the operation's handler runs inside it (spec-router.ts), and the
 * count records its decision here, so no domain signature carries it. The scope starts at the handler,
 * not in the layer, because the body is read between the two, in stream callbacks that run outside it.
 */
const current = new AsyncLocalStorage<RateLimitHolder>();

/** Runs an operation's handler with its request's holder as the context. */
export function withRateLimitHolder<T>(holder: RateLimitHolder, run: () => T): T {
  return current.run(holder, run);
}

/** Records a count's decision for the response's headers; outside a rate-limited request, nothing. */
export function recordRateLimitDecision(decision: RateLimitDecision, scope: RateLimitScope = 'key'): void {
  current.getStore()?.record(decision, scope);
}
