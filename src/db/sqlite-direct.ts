import type { Kysely, QueryResult } from 'kysely';
import type { Translate } from './guarded-dialect';
import type { Database } from './schema';

/** The part of better-sqlite3 a direct run needs: `inTransaction` and prepared statements (cached by SQL text). */
export interface SqliteHandle {
  readonly inTransaction: boolean;
  prepare(sql: string): {
    readonly reader: boolean;
    all(parameters: readonly unknown[]): unknown[];
    run(parameters: readonly unknown[]): { changes: number; lastInsertRowid: number | bigint };
  };
}

type DirectRun = (db: Kysely<Database>, sql: string, parameters: readonly unknown[]) => QueryResult<unknown> | undefined;

/** By kysely adapter instance: a database and every transaction on it share one. */
const directRuns = new WeakMap<object, DirectRun>();
/** Transactions whose queries may run directly: open, and begun by withDirectRuns (the group commit's). */
const liveTransactions = new WeakSet<Kysely<Database>>();

/**
 * Runs `work` with `trx`'s prepared queries allowed to go directly to the connection, for as long
 * as it runs. Outside it (any other transaction, or this one after it ended), they take kysely's
 * path, which refuses a transaction already committed or rolled back.
 */
export async function withDirectRuns<T>(trx: Kysely<Database>, work: () => Promise<T>): Promise<T> {
  liveTransactions.add(trx);
  const run = directRunOf(trx);
  // Compiled queries handed to trx.executeQuery (raw statements, such as a refund's rollup upserts) take
  // the direct run too while the transaction is live; builders and anything the direct run declines keep
  // kysely's path.
  if (run) {
    const viaKysely = trx.executeQuery.bind(trx);
    const direct = async (query: Parameters<typeof trx.executeQuery>[0], queryId?: Parameters<typeof trx.executeQuery>[1]) =>
      (isCompiled(query) ? run(trx, query.sql, query.parameters) : undefined) ?? viaKysely(query, queryId);
    Object.defineProperty(trx, 'executeQuery', { value: direct, configurable: true, writable: true });
  }
  try {
    return await work();
  } finally {
    liveTransactions.delete(trx);
    if (run) delete (trx as { executeQuery?: unknown }).executeQuery;
  }
}

function isCompiled(query: object): query is { sql: string; parameters: readonly unknown[] } {
  return typeof (query as { sql?: unknown }).sql === 'string' && Array.isArray((query as { parameters?: unknown }).parameters);
}

/**
 * SQLite only: lets prepared hot-path queries (prepared-query.ts) run on the connection at once,
 * without kysely's executor (its connection provider, mutex and promise chain cost more than the
 * statement: ~5 KB of garbage and several µs a query). Results and errors are the same as kysely's
 * SQLite driver behind guardedDialect gives.
 *
 * A query on a transaction (`trx`) runs in it, when the transaction is live (withDirectRuns):
 * SQLite has one connection, and kysely runs a transaction's queries one after the other on it
 * anyway. A query on the database itself runs directly only while no transaction is open on the
 * connection; otherwise it takes kysely's path, which waits for that transaction to end (it must
 * not become part of it). A Kysely instance with plugins always takes kysely's path (they may
 * transform results).
 *
 * A direct statement runs when it is called, not a few microtasks later as kysely's would: a
 * caller that issues dependent queries without awaiting the first must not use prepared queries.
 */
export function enableDirectSqlite(db: Kysely<Database>, sqlite: SqliteHandle, translate: Translate): void {
  directRuns.set(db.getExecutor().adapter, (on, sql, parameters) => {
    if (on.isTransaction ? !liveTransactions.has(on) : sqlite.inTransaction) return undefined;
    if (on.getExecutor().plugins.length > 0) return undefined;
    try {
      const statement = sqlite.prepare(sql);
      if (statement.reader) return { rows: statement.all(parameters) };
      const { changes, lastInsertRowid } = statement.run(parameters);
      return { numAffectedRows: BigInt(changes), insertId: BigInt(lastInsertRowid), rows: [] };
    } catch (error) {
      throw translate(error);
    }
  });
}

/** The direct run of `db`'s engine, when it has one (SQLite). */
export function directRunOf(db: Kysely<Database>): DirectRun | undefined {
  return directRuns.get(db.getExecutor().adapter);
}
