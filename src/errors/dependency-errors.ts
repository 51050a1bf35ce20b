import { ApiError } from './api-error';

/** The external parts a request can need: the database (SQLite or PostgreSQL), Redis and the image store (S3). */
export type Dependency = 'database' | 'redis' | 'image_store';

const DESCRIBED: Record<Dependency, string> = {
  database: 'The database',
  redis: 'Redis (rate limits and shared capacity)',
  image_store: 'The image store',
};

/** Seconds a client is told to wait after `dependency_unavailable`; outages we ride out are short. */
export const DEPENDENCY_RETRY_AFTER_SECONDS = 2;

/**
 * A dependency failed in a way an operator can expect (down, restarting, unreachable, disk full,
 * read-only): clients get 503 `dependency_unavailable`, never 500. `cause` is the driver's error,
 * which the log keeps.
 */
export class DependencyUnavailableError extends Error {
  override name = 'DependencyUnavailableError';

  constructor(
    readonly dependency: Dependency,
    override readonly cause: unknown,
    /** What the request had written when it failed; decides what its 503 may promise. Unset: nothing that charges. */
    readonly outcome?: ChargeOutcome,
  ) {
    super(`${dependency} unavailable: ${describeCause(cause)}`);
  }
}

/**
 * What a request that met an outage may have left behind, for its 503:
 * - `reservation`: a reservation that may commit after the answer; its generation is held under a
 *   lease no run renews, and released (not charged) within `releasedWithinSeconds`;
 * - `unknown`: a write that charges (a settlement, or a queued generation a worker would run) was
 *   sent and not answered: it may take effect once the database answers, so the client looks it up.
 */
export type ChargeOutcome = { kind: 'reservation'; generationId: string; releasedWithinSeconds: number } | { kind: 'unknown'; generationId: string };

/** `error` (a database outage) as the 503 of a request in the given phase; other errors unchanged. */
export function withChargeOutcome(error: unknown, outcome: ChargeOutcome): unknown {
  if (error instanceof DependencyUnavailableError) return new DependencyUnavailableError(error.dependency, error.cause, outcome);
  return isDatabaseUnavailable(error) ? new DependencyUnavailableError('database', error, outcome) : error;
}

interface DriverError {
  code?: unknown;
  message?: unknown;
  errors?: unknown;
}

function describeCause(cause: unknown): string {
  const e = cause as DriverError | undefined;
  const code = typeof e?.code === 'string' ? e.code : undefined;
  const message = typeof e?.message === 'string' && e.message !== '' ? e.message : undefined;
  const nested = Array.isArray(e?.errors) ? (e.errors as unknown[]).map(describeCause).join('; ') : undefined;
  return [code, message ?? nested].filter(Boolean).join(' ') || String(cause);
}

/** Socket-level failures: the peer is gone, refused, or did not answer in time. */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNABORTED']);

/**
 * PostgreSQL SQLSTATEs that mean "the server cannot serve now": class 08 (connection exception),
 * 53 (insufficient resources: too many connections, disk full), 57P01-57P05 (shutdown, crash
 * recovery, idle timeout), 57014 (our statement_timeout), 25006 (read-only transaction: a standby).
 */
function isPostgresUnavailable(code: string): boolean {
  return /^(08|53)/.test(code) || /^57P0[1-5]$/.test(code) || code === '57014' || code === '25006';
}

/**
 * SQLite result codes that are about the file or the disk, not the statement: full disk,
 * read-only file, I/O errors, a lock held past busy_timeout, a file that cannot be opened.
 */
function isSqliteUnavailable(code: string): boolean {
  return /^SQLITE_(FULL|READONLY|IOERR|BUSY|LOCKED|CANTOPEN|NOMEM|PROTOCOL)/.test(code);
}

/** node-postgres reports a lost or slow server with plain Errors whose message is all we get. */
const PG_CONNECTION_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Query read timeout',
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
];

/** Whether a database driver's error means the database is unavailable (not that the query is wrong). */
export function isDatabaseUnavailable(error: unknown): boolean {
  const e = error as DriverError | undefined;
  if (!e || typeof e !== 'object') return false;
  const code = typeof e.code === 'string' ? e.code : '';
  if (NETWORK_CODES.has(code) || isSqliteUnavailable(code) || isPostgresUnavailable(code)) return true;
  if (Array.isArray(e.errors) && e.errors.length > 0 && e.errors.every(isDatabaseUnavailable)) return true;
  const message = typeof e.message === 'string' ? e.message : '';
  return PG_CONNECTION_MESSAGES.some((known) => message.startsWith(known));
}

/**
 * Redis replies that mean "this server cannot serve now" (loading, read-only replica, out of
 * memory...). Other replies (a script error) are bugs, not outages.
 */
const REDIS_UNAVAILABLE_REPLIES = /^(LOADING|BUSY|READONLY|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|OOM|NOREPLICAS|MISCONF)\b/;

/**
 * Whether an ioredis error means Redis is unavailable: any connection or timeout error, or one of
 * the replies above. A JavaScript error of our own (TypeError, ...) is a bug: a 500, not an outage
 * that would mark Redis failed for /readyz.
 */
export function isRedisUnavailable(error: unknown): boolean {
  const e = error as { name?: unknown; message?: unknown } | undefined;
  if (!e || typeof e !== 'object') return false;
  if (e instanceof TypeError || e instanceof RangeError || e instanceof ReferenceError || e instanceof SyntaxError) return false;
  if (e.name === 'ReplyError') return typeof e.message === 'string' && REDIS_UNAVAILABLE_REPLIES.test(e.message);
  return true;
}

/** A dependency that failed as operators expect (down, hung, full) as the client sees it; undefined for anything else. */
export function dependencyApiError(err: unknown): ApiError | undefined {
  if (!(err instanceof DependencyUnavailableError) && !isDatabaseUnavailable(err)) return undefined;
  const dependency = err instanceof DependencyUnavailableError ? err.dependency : 'database';
  const what = DESCRIBED[dependency];
  const outcome = err instanceof DependencyUnavailableError ? err.outcome : undefined;
  const headers = { 'Retry-After': String(DEPENDENCY_RETRY_AFTER_SECONDS) };
  if (outcome?.kind === 'unknown') {
    const id = outcome.generationId;
    return new ApiError(
      'dependency_unavailable',
      `${what} stopped answering after generation ${id} was sent to it to be recorded; whether it was charged is unknown until the database answers. Look it up with GET /generations/${id} before retrying.`,
      { details: { dependency, generation_id: id, charged: 'unknown' }, headers },
    );
  }
  if (outcome?.kind === 'reservation') {
    const id = outcome.generationId;
    return new ApiError(
      'dependency_unavailable',
      `${what} is unavailable; this request is not charged: if its reservation reached the database, generation ${id} is released within ${outcome.releasedWithinSeconds} s (GET /generations/${id} shows it failed). Retry in ${DEPENDENCY_RETRY_AFTER_SECONDS} s.`,
      { details: { dependency, generation_id: id, charged: 'no' }, headers },
    );
  }
  return new ApiError('dependency_unavailable', `${what} is unavailable; this request is not charged. Retry in ${DEPENDENCY_RETRY_AFTER_SECONDS} s.`, {
    details: { dependency },
    headers,
  });
}

/** The database (not Redis) failed: down, hung, full or read-only. */
export function isDatabaseOutage(error: unknown): boolean {
  return error instanceof DependencyUnavailableError ? error.dependency === 'database' : isDatabaseUnavailable(error);
}
