import fs from 'node:fs';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect, type SqliteDatabase } from 'kysely';
import type { Pool as PgPool, types as PgTypes } from 'pg';
import type { DependencyHealth } from '../health/dependency-health';
import { boundedPools } from './bounded-pool';
import { databaseErrorTranslator, guardedDialect } from './guarded-dialect';
import type { Database } from './schema';
import { enableDirectSqlite } from './sqlite-direct';
import { POSTGRES_CAPABILITIES, SQLITE_CAPABILITIES, type StorageCapabilities } from './storage-capabilities';
import { type AdmissionBound, directTransactions, GroupCommit, type WriteTransactions } from './write-transactions';

export type DatabaseEngine = 'sqlite' | 'postgres';

export interface GatewayDatabase {
  db: Kysely<Database>;
  /** Which migrations' branches apply (src/db/migrations/); what the engine can do is `capabilities`. */
  engine: DatabaseEngine;
  /** What the engine can do; capabilitiesOf(db) answers the same for a handle or a transaction. */
  capabilities: StorageCapabilities;
  /** How the request path's write transactions run: grouped on SQLite, one each on PostgreSQL. */
  writes: WriteTransactions;
  /** SQLite: `PRAGMA data_version` of the gateway's connection (moves when another connection commits). */
  dataVersion?: () => number;
  /** PostgreSQL: the longest one operation may take (operationBudgetMs); waits of our own (a batch's queue) stay within it too. */
  operationBudgetMs?: number;
  close(): Promise<void>;
}

export function engineOf(databaseUrl: string): DatabaseEngine {
  return /^postgres(ql)?:\/\//.test(databaseUrl) ? 'postgres' : 'sqlite';
}

// Our bigint columns hold epoch milliseconds and credit counts: far below 2^53, so numbers are exact.
function pgTypeParsers(types: typeof PgTypes) {
  return {
    getTypeParser: ((oid: number, format?: string) =>
      oid === types.builtins.INT8 ? (value: string) => Number(value) : types.getTypeParser(oid, format as 'text')) as typeof types.getTypeParser,
  };
}

/**
 * better-sqlite3 compiles a statement on every prepare(), and kysely prepares every query it runs;
 * reusing prepared statements by SQL text removes that cost from the hot path (it was 12% of CPU).
 * Evicted in insertion order, so the size leaves room for every text the request path uses (the
 * usage rollups alone have about 250: five tables by 49 latency variants (48 buckets or none), and their refunds) beside
 * the admin and analytics queries.
 */
function withStatementCache(sqlite: SQLite.Database, size = 2000): SqliteDatabase {
  const statements = new Map<string, SQLite.Statement>();
  return {
    close: () => sqlite.close(),
    prepare(text: string) {
      let statement = statements.get(text);
      if (!statement) {
        statement = sqlite.prepare(text);
        if (statements.size >= size) statements.delete(statements.keys().next().value as string);
        statements.set(text, statement);
      }
      return statement;
    },
  };
}

export interface OpenDatabaseOptions {
  poolSize?: number;
  onIdleError?: (error: Error) => void;
  /** PostgreSQL: longest wait for a connection from the pool or the server. */
  connectTimeoutMs?: number;
  /**
   * PostgreSQL: the server cancels a statement after this; one database operation (the wait for a
   * connection and every statement of a transaction together) is given up 1 s later.
   */
  statementTimeoutMs?: number;
  /** Told of every failure that means the database is unavailable (for /readyz and the log). */
  health?: DependencyHealth;
  /**
   * Told how long each piece of work waited for the database before it ran (ms): SQLite's group-commit
   * queue, a PostgreSQL pool checkout. The overload signal of load shedding (src/http/load-shedding.ts).
   */
  onWait?: (ms: number) => void;
  /**
   * ADMISSION_DATABASE_WAIT_MS: the longest a reservation (writes.admit) waits for the database while
   * it serves work admitted before; past it the reservation is refused with `refused()`, nothing run.
   */
  admission?: AdmissionBound;
}

/** The longest one PostgreSQL operation (connection wait included) may take: statement_timeout plus 1 s. */
export function operationBudgetMs(statementTimeoutMs: number): number {
  return statementTimeoutMs + 1000;
}

export function openDatabase(databaseUrl: string, options: OpenDatabaseOptions = {}): GatewayDatabase {
  if (engineOf(databaseUrl) === 'postgres') {
    // Loaded only when used: pg adds ~15 MB of memory to a gateway that runs on SQLite.
    const { Pool, types } = require('pg') as { Pool: typeof PgPool; types: typeof PgTypes };
    const statementTimeoutMs = options.statementTimeoutMs ?? 5000;
    const pool = new Pool({
      connectionString: databaseUrl,
      max: options.poolSize ?? 10,
      types: pgTypeParsers(types),
      // Bounded waits: a server that is down refuses at once, but one that is unreachable or hung
      // would otherwise hold requests for the whole outage.
      connectionTimeoutMillis: options.connectTimeoutMs ?? 2000,
      statement_timeout: statementTimeoutMs,
      keepAlive: true,
    });
    // A connection dropped by the server (restart, failover) is replaced on next use. pg emits the
    // drop as an 'error' event, on the pool for an idle connection and on the client itself for one
    // in use between two queries (inside a transaction): without listeners it would end the process.
    // The query that needed it fails on its own, as DependencyUnavailableError.
    const onDropped = options.onIdleError ?? (() => undefined);
    pool.on('error', onDropped);
    pool.on('connect', (client) => client.on('error', onDropped));
    // The client-side bound, for a server that stopped answering without closing the socket: per
    // operation, not per statement, so a transaction of several statements waits no longer than one.
    const budgetMs = operationBudgetMs(statementTimeoutMs);
    const pools = boundedPools(pool, budgetMs, options.onWait);
    const db = new Kysely<Database>({ dialect: guardedDialect(new PostgresDialect({ pool: pools.pool }), options.health) });
    const admission = options.admission;
    // Closing it closes nothing: its pool is the one `db` ends.
    const admissionDb =
      admission && admission.waitMs > 0
        ? new Kysely<Database>({ dialect: guardedDialect(new PostgresDialect({ pool: pools.admission(admission) }), options.health) })
        : db;
    return {
      db,
      engine: 'postgres',
      capabilities: POSTGRES_CAPABILITIES,
      writes: directTransactions(db, admissionDb),
      operationBudgetMs: budgetMs,
      close: () => db.destroy(),
    };
  }
  const file = databaseUrl.replace(/^sqlite:/, '');
  if (file !== ':memory:') fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  const sqlite = new SQLite(file);
  // WAL lets readers run beside the writer; busy_timeout makes several processes on one file wait, not fail.
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('busy_timeout = 5000');
  sqlite.pragma('synchronous = NORMAL');
  const statements = withStatementCache(sqlite);
  const db = new Kysely<Database>({ dialect: guardedDialect(new SqliteDialect({ database: statements }), options.health) });
  enableDirectSqlite(
    db,
    {
      get inTransaction() {
        return sqlite.inTransaction;
      },
      prepare: (text) => statements.prepare(text) as SQLite.Statement,
    },
    databaseErrorTranslator(options.health),
  );
  const dataVersion = sqlite.prepare('PRAGMA data_version').pluck();
  return {
    db,
    engine: 'sqlite',
    capabilities: SQLITE_CAPABILITIES,
    writes: new GroupCommit(db, undefined, options.onWait, options.admission),
    dataVersion: () => dataVersion.get() as number,
    close: () => db.destroy(),
  };
}
