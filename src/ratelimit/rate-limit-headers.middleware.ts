import type { RequestHandler, Response } from 'express';
import type { Clock } from '../shared/clock';
import type { ClientKey } from '../keys/key.model';
import type { RateLimitDecision, RateLimitHolder, RateLimiter, RateLimitScope } from './rate-limiter';

/**
 * IETF draft (httpapi-ratelimit-headers) fields plus the widespread X-RateLimit-* trio. A key in a
 * project with its own limit gets both policies (`rpm`, the key's; `project-rpm`, counted across the
 * project's keys), and the trio gives the one that binds: the fewer requests left, so a client that
 * reads only the trio sees what it can still send.
 */
function setRateLimitHeaders(res: Response, key: RateLimitDecision, project: RateLimitDecision | undefined): void {
  const policies = project ? [['rpm', key] as const, ['project-rpm', project] as const] : [['rpm', key] as const];
  res.setHeader('RateLimit-Policy', policies.map(([name, d]) => `"${name}";q=${d.limit};w=60`).join(', '));
  res.setHeader('RateLimit', policies.map(([name, d]) => `"${name}";r=${d.remaining};t=${d.resetSeconds}`).join(', '));
  const binding = project && bindsBefore(project, key) ? project : key;
  res.setHeader('X-RateLimit-Limit', String(binding.limit));
  res.setHeader('X-RateLimit-Remaining', String(binding.remaining));
  res.setHeader('X-RateLimit-Reset', String(binding.resetSeconds));
}

/** Whether `a` leaves fewer requests than `b` (or as few, for longer). */
function bindsBefore(a: RateLimitDecision, b: RateLimitDecision): boolean {
  return a.remaining < b.remaining || (a.remaining === b.remaining && a.resetSeconds > b.resetSeconds);
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
  projectCounted: RateLimitDecision | undefined;

  constructor(
    readonly key: ClientKey | undefined,
    readonly limiter: RateLimiter,
    readonly clock: Clock,
    readonly end: Response['end'],
  ) {}

  record(decision: RateLimitDecision, scope: RateLimitScope = 'key'): void {
    if (scope === 'project') this.projectCounted = decision;
    else this.counted = decision;
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
  const { key } = state;
  const project = key?.project ?? null;
  const projectLimit = project?.rateLimitRpm ?? null;
  // The project's count comes after the key's: a request the key's limit refused has none, and it is looked up.
  const projectKnown = state.projectCounted !== undefined || projectLimit === null;
  if (state.counted && (projectKnown || UNLOOKED_STATUSES.has(this.statusCode))) {
    setRateLimitHeaders(this, state.counted, state.projectCounted);
    return end.apply(this, args);
  }
  if (!key || UNLOOKED_STATUSES.has(this.statusCode)) return end.apply(this, args);
  const now = state.clock.now();
  // The headers never fail the response: without an answer from the limiter it goes without them.
  Promise.all([
    state.counted ?? state.limiter.peek(key.id, key.rateLimitRpm, now),
    project === null || projectLimit === null ? undefined : state.limiter.peek(project.id, projectLimit, now),
  ])
    .then(
      ([decision, project]) => {
        if (!this.headersSent) setRateLimitHeaders(this, decision, project);
      },
      () => undefined,
    )
    .then(() => end.apply(this, args))
    .catch(() => this.destroy());
  return this;
}
