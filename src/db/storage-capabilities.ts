import { type Kysely, PostgresAdapter } from 'kysely';

/**
 * What the database engine can do, named by what the code needs rather than by engine: code asks
 * `capabilitiesOf(trx).rowLocks`, not "is this PostgreSQL?". Two engines, so two values below; the
 * one place that tells them apart is capabilitiesOf() (and openDatabase(), which knows what it opened).
 */
export interface StorageCapabilities {
  /** What readiness and its refusals call the database. */
  readonly label: 'PostgreSQL' | 'SQLite';
  /**
   * `SELECT ... FOR UPDATE`: a transaction holds the rows it read until it commits. SQLite needs none:
   * one transaction writes at a time.
   */
  readonly rowLocks: boolean;
  /** `FOR UPDATE SKIP LOCKED`: concurrent claimers (workers, webhook dispatchers) pass over rows another is claiming. */
  readonly skipLocked: boolean;
  /** `pg_advisory_xact_lock`: a transaction-scoped lock on a name, with no row to lock. */
  readonly advisoryLocks: boolean;
  /**
   * One statement writes several tables (data-modifying CTEs) and many rows (array parameters): the
   * reservation with its generation row, the settlement with its attempts and usage rollups, each as
   * one statement, and concurrent requests' statements batched into one. Those statements are written
   * in PostgreSQL's SQL (sql-text.ts); without this, the general path writes them one by one in a
   * transaction (SQLite's group commit batches transactions instead).
   */
  readonly oneStatementWrites: boolean;
  /** Settings scoped to one transaction (`set_config(..., true)`): an analytics query's work_mem, JIT, parallel workers. */
  readonly transactionSettings: boolean;
  /**
   * Served over the network, so replicas on other hosts write to it and nothing local (SQLite's
   * `PRAGMA data_version`) tells this process of their writes: a cache of rows needs invalidating
   * from outside (Redis).
   */
  readonly sharedAcrossHosts: boolean;
}

export const POSTGRES_CAPABILITIES: StorageCapabilities = Object.freeze({
  label: 'PostgreSQL',
  rowLocks: true,
  skipLocked: true,
  advisoryLocks: true,
  oneStatementWrites: true,
  transactionSettings: true,
  sharedAcrossHosts: true,
});

export const SQLITE_CAPABILITIES: StorageCapabilities = Object.freeze({
  label: 'SQLite',
  rowLocks: false,
  skipLocked: false,
  advisoryLocks: false,
  oneStatementWrites: false,
  transactionSettings: false,
  sharedAcrossHosts: false,
});

/**
 * The capabilities of the database behind `db`: a gateway's handle, a transaction, or a repository's
 * own. Told by the dialect's adapter, which every handle and transaction of one database shares.
 */
export function capabilitiesOf(db: Pick<Kysely<unknown>, 'getExecutor'>): StorageCapabilities {
  return db.getExecutor().adapter instanceof PostgresAdapter ? POSTGRES_CAPABILITIES : SQLITE_CAPABILITIES;
}
