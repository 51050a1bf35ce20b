import { type Kysely, sql } from 'kysely';
import type { Logger } from 'pino';
import type { Database } from '../db/schema';
import { capabilitiesOf } from '../db/storage-capabilities';
import { type Dependency, DependencyUnavailableError, isDatabaseUnavailable } from '../errors/dependency-errors';
import type { ImageStore } from '../images/image-store';
import type { Clock } from '../shared/clock';
import type { DependencyHealth } from './dependency-health';

/** One dependency's live check: resolves when it serves now. */
export interface DependencyProbe {
  dependency: Dependency;
  /** For operators' messages: "PostgreSQL", "SQLite", "Redis". */
  label: string;
  check(): Promise<void>;
}

/** How long one answer of a probe that costs a request to another service (S3) serves /readyz. */
export const REMOTE_PROBE_CACHE_MS = 5000;

/**
 * The image store's probe when it has one (S3; a directory needs none), bounded by `timeoutMs` and its
 * answer (success or failure) reused for `cacheMs`: load balancers probe every replica every few
 * seconds, and each probe would otherwise be a request to S3.
 */
export function imageStoreProbe(store: ImageStore, clock: Clock, options: { timeoutMs?: number; cacheMs?: number } = {}): DependencyProbe | undefined {
  const check = store.check?.bind(store);
  if (!check) return undefined;
  const timeoutMs = options.timeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS;
  const cacheMs = options.cacheMs ?? REMOTE_PROBE_CACHE_MS;
  let last: { at: number; answer: Promise<void> } | undefined;
  return {
    dependency: 'image_store',
    label: 'The S3 image store',
    check: () => {
      const now = clock.now();
      if (!last || now - last.at >= cacheMs) {
        const answer = check(AbortSignal.timeout(timeoutMs));
        // A cached failure is read again by later probes; unread meanwhile, it is no unhandled rejection.
        answer.catch(() => undefined);
        last = { at: now, answer };
      }
      return last.answer;
    },
  };
}

export type Readiness = { ready: true } | { ready: false; dependency: Dependency; label: string; reason: string };

export function databaseProbe(db: Kysely<Database>): DependencyProbe {
  return {
    dependency: 'database',
    label: capabilitiesOf(db).label,
    check: async () => {
      await sql`SELECT 1`.execute(db);
    },
  };
}

/**
 * Readiness: every dependency answers its probe now, and none failed on the request path within
 * the last `failureWindowMs`. The second part catches what a probe cannot see: a full disk or a
 * read-only SQLite file still answers `SELECT 1`, but every write fails.
 */
export class ReadinessService {
  constructor(
    private readonly probes: DependencyProbe[],
    private readonly health: DependencyHealth | undefined,
    private readonly clock: Clock,
    private readonly failureWindowMs: number,
    /** A probe that has not answered after this counts as not ready: /readyz must answer a load balancer in time, hung dependency or not. */
    private readonly probeTimeoutMs = DEFAULT_PROBE_TIMEOUT_MS,
  ) {}

  async check(): Promise<Readiness> {
    const results = await Promise.all(this.probes.map((probe) => this.checkOne(probe)));
    return results.find((result) => !result.ready) ?? { ready: true };
  }

  private async checkOne(probe: DependencyProbe): Promise<Readiness> {
    const { dependency, label } = probe;
    let timer: NodeJS.Timeout | undefined;
    try {
      const check = probe.check();
      // The probe goes on after we stop waiting; its own failure is of no interest then.
      check.catch(() => undefined);
      await Promise.race([
        check,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new ProbeTimeout(`${label} did not answer within ${this.probeTimeoutMs} ms`)), this.probeTimeoutMs);
        }),
      ]);
    } catch (error) {
      this.health?.failed(dependency, error);
      return { ready: false, dependency, label, reason: `${label} does not answer.` };
    } finally {
      clearTimeout(timer);
    }
    const failedAt = this.health?.lastFailure(dependency);
    if (failedAt !== undefined && this.clock.now() - failedAt < this.failureWindowMs) {
      return { ready: false, dependency, label, reason: `${label} failed requests in the last ${Math.ceil(this.failureWindowMs / 1000)} s.` };
    }
    return { ready: true };
  }
}

/** How long /readyz waits for a probe by default. */
export const DEFAULT_PROBE_TIMEOUT_MS = 2000;

/** A probe that did not answer in time (a hung server): an outage, like a timeout of the driver. */
class ProbeTimeout extends Error {
  override name = 'ProbeTimeout';
  readonly code = 'ETIMEDOUT';
}

/** At startup PostgreSQL or Redis may still be coming up: retry with backoff for a bounded time. */
export class DependencyStartupError extends Error {
  override name = 'DependencyStartupError';
}

const FIRST_RETRY_DELAY_MS = 250;
const MAX_RETRY_DELAY_MS = 5000;

/** Waits until every probe passes, retrying with doubling delays; gives up after `timeoutMs`. */
export async function waitForDependencies(
  probes: DependencyProbe[],
  options: { timeoutMs: number; logger: Logger; sleep?: (ms: number) => Promise<void> },
): Promise<void> {
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const started = Date.now();
  let delay = FIRST_RETRY_DELAY_MS;
  for (const probe of probes) {
    for (;;) {
      try {
        await probe.check();
        break;
      } catch (error) {
        // A database that answers with a real error (bad password, no such database) will not get better.
        const reason = (error as Error)?.message || String(error);
        if (probe.dependency === 'database' && !(error instanceof DependencyUnavailableError) && !isDatabaseUnavailable(error)) {
          throw new DependencyStartupError(`${probe.label} refused the connection: ${reason}`);
        }
        const elapsed = Date.now() - started;
        if (elapsed >= options.timeoutMs) {
          throw new DependencyStartupError(
            `${probe.label} is unreachable: gave up after ${(elapsed / 1000).toFixed(1)} s (DEPENDENCY_STARTUP_TIMEOUT_MS=${options.timeoutMs}): ${reason}`,
          );
        }
        options.logger.warn({ dependency: probe.dependency, retry_in_ms: delay, reason }, `${probe.label} is unreachable; retrying`);
        await sleep(Math.min(delay, options.timeoutMs - elapsed));
        delay = Math.min(delay * 2, MAX_RETRY_DELAY_MS);
      }
    }
  }
}
