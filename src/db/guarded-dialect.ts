import type { DatabaseConnection, Dialect, Driver, QueryResult, TransactionSettings } from 'kysely';
import { DependencyUnavailableError, isDatabaseUnavailable } from '../errors/dependency-errors';
import type { DependencyHealth } from '../health/dependency-health';

/** Turns a driver error that means "the database is unavailable" into DependencyUnavailableError. */
export type Translate = (error: unknown) => unknown;

/**
 * SQLite rolls a transaction back by itself on SQLITE_FULL, SQLITE_IOERR and some SQLITE_BUSY;
 * kysely's ROLLBACK then fails with this, and kysely throws that instead of the real cause.
 */
const NOTHING_TO_ROLL_BACK = 'cannot rollback - no transaction is active';

class GuardedConnection implements DatabaseConnection {
  constructor(
    readonly inner: DatabaseConnection,
    private readonly translate: Translate,
  ) {}

  async executeQuery<R>(query: Parameters<DatabaseConnection['executeQuery']>[0]): Promise<QueryResult<R>> {
    try {
      return await this.inner.executeQuery<R>(query);
    } catch (error) {
      throw this.translate(error);
    }
  }

  async *streamQuery<R>(...args: Parameters<DatabaseConnection['streamQuery']>): AsyncIterableIterator<QueryResult<R>> {
    try {
      yield* this.inner.streamQuery<R>(...args);
    } catch (error) {
      throw this.translate(error);
    }
  }
}

function innerOf(connection: DatabaseConnection): DatabaseConnection {
  return connection instanceof GuardedConnection ? connection.inner : connection;
}

class GuardedDriver implements Driver {
  constructor(
    private readonly inner: Driver,
    private readonly translate: Translate,
  ) {}

  private async guard<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      throw this.translate(error);
    }
  }

  init(): Promise<void> {
    return this.guard(() => this.inner.init());
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    return new GuardedConnection(await this.guard(() => this.inner.acquireConnection()), this.translate);
  }

  beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    return this.guard(() => this.inner.beginTransaction(innerOf(connection), settings));
  }

  commitTransaction(connection: DatabaseConnection): Promise<void> {
    return this.guard(() => this.inner.commitTransaction(innerOf(connection)));
  }

  /**
   * A rollback runs because something already failed, and kysely rethrows the rollback's error in
   * place of that first one. When the transaction is already gone (SQLite ended it; the PostgreSQL
   * connection died and the pool drops it) the rollback's failure says nothing new: keep the cause.
   */
  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    try {
      await this.inner.rollbackTransaction(innerOf(connection));
    } catch (error) {
      if ((error as Error)?.message === NOTHING_TO_ROLL_BACK || isDatabaseUnavailable(error)) return;
      throw error;
    }
  }

  releaseConnection(connection: DatabaseConnection): Promise<void> {
    return this.inner.releaseConnection(innerOf(connection));
  }

  destroy(): Promise<void> {
    return this.inner.destroy();
  }
}

/** What guardedDialect does to a failure, for code that runs statements without kysely (sqlite-direct.ts). */
export function databaseErrorTranslator(health: DependencyHealth | undefined): Translate {
  return (error) => {
    if (error instanceof DependencyUnavailableError || !isDatabaseUnavailable(error)) return error;
    return health ? health.failed('database', error) : new DependencyUnavailableError('database', error);
  };
}

/**
 * Wraps a kysely dialect so every query, connection and transaction reports an unavailable
 * database to `health` and fails with DependencyUnavailableError (a 503), whatever code ran it.
 */
export function guardedDialect(dialect: Dialect, health: DependencyHealth | undefined): Dialect {
  const translate = databaseErrorTranslator(health);
  return {
    createAdapter: () => dialect.createAdapter(),
    createDriver: () => new GuardedDriver(dialect.createDriver(), translate),
    createIntrospector: (db) => dialect.createIntrospector(db),
    createQueryCompiler: () => dialect.createQueryCompiler(),
  };
}
