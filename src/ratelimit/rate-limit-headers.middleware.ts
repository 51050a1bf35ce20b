import type { RequestHandler, Response } from 'express';
import type { Clock } from '../shared/clock';
import type { ClientKey } from '../keys/key.model';
import type { RateLimitDecision, RateLimitHolder, RateLimiter } from './rate-limiter';

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
    const principal = res.locals.principal;
    const state = new HeaderState(principal?.kind === 'client' ? principal.key : undefined, limiter, clock, res.end);
    res.locals.rateLimit = state;
    (res as StatefulResponse)[STATE] = state;
    res.end = endWithRateLimitHeaders as Response['end'];
    next();
  };
}

const STATE = Symbol('rate-limit headers');
type StatefulResponse = Response & { [STATE]?: HeaderState };
type End = (this: Response, ...args: unknown[]) => Response;

/** A request's rate-limit state: the holder its count records in, and what the response's end needs. */
class HeaderState implements RateLimitHolder {
  counted: RateLimitDecision | undefined;

  constructor(
    readonly key: ClientKey | undefined,
    readonly limiter: RateLimiter,
    readonly clock: Clock,
    readonly end: Response['end'],
  ) {}

  record(decision: RateLimitDecision): void {
    this.counted = decision;
  }
}

/**
 * The one `end` of every rate-limited response, with the request's state on the response rather
 * than in a closure made per request: a closure stored on each response kept finished requests
 * alive through V8's young collections, as did every object that referenced them
 * (docs/benchmarks-history.md, "Promoted requests").
 */
function endWithRateLimitHeaders(this: StatefulResponse, ...args: unknown[]): Response {
  const state = this[STATE];
  const end = (state?.end ?? Object.getPrototypeOf(this).end) as End;
  if (!state || this.headersSent) return end.apply(this, args);
  if (state.counted) {
    setRateLimitHeaders(this, state.counted);
    return end.apply(this, args);
  }
  if (!state.key || UNLOOKED_STATUSES.has(this.statusCode)) return end.apply(this, args);
  // The headers never fail the response: without an answer from the limiter it goes without them.
  state.limiter
    .peek(state.key.id, state.key.rateLimitRpm, state.clock.now())
    .then(
      (decision) => {
        if (!this.headersSent) setRateLimitHeaders(this, decision);
      },
      () => undefined,
    )
    .then(() => end.apply(this, args))
    .catch(() => this.destroy());
  return this;
}
