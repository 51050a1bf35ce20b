import type { Logger } from 'pino';
import type { Clock } from '../shared/clock';
import { type Dependency, DependencyUnavailableError } from '../errors/dependency-errors';

/** How often one dependency's failures are logged at most: an outage fails thousands of requests. */
const LOG_EVERY_MS = 1000;

/**
 * What the request path has seen of each dependency: the last failure, for /readyz, and the log
 * of its real cause (the driver's error), once a second at most with a count of the ones skipped.
 */
export class DependencyHealth {
  private readonly lastFailureAt = new Map<Dependency, number>();
  private readonly lastLoggedAt = new Map<Dependency, number>();
  private readonly unlogged = new Map<Dependency, number>();

  constructor(
    private readonly clock: Clock,
    private readonly logger: Logger | undefined,
  ) {}

  /** Records the failure and returns the error to throw in its place. */
  failed(dependency: Dependency, cause: unknown): DependencyUnavailableError {
    const error = cause instanceof DependencyUnavailableError ? cause : new DependencyUnavailableError(dependency, cause);
    const now = this.clock.now();
    this.lastFailureAt.set(dependency, now);
    const skipped = this.unlogged.get(dependency) ?? 0;
    if (now - (this.lastLoggedAt.get(dependency) ?? -Infinity) >= LOG_EVERY_MS) {
      this.lastLoggedAt.set(dependency, now);
      this.unlogged.set(dependency, 0);
      this.logger?.error({ err: error.cause, dependency, failures_not_logged: skipped }, error.message);
    } else {
      this.unlogged.set(dependency, skipped + 1);
    }
    return error;
  }

  /** When the request path last saw the dependency fail (undefined: never). */
  lastFailure(dependency: Dependency): number | undefined {
    return this.lastFailureAt.get(dependency);
  }
}
