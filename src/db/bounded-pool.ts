import type { PostgresCursor, PostgresPool, PostgresPoolClient, PostgresQueryResult } from 'kysely';
import type { Pool, PoolClient } from 'pg';
import type { AdmissionBound } from './write-transactions';

/**
 * A database wait that ran out of its operation's time. `mayHaveCommitted` says whether its
 * write can still take effect: a statement sent outside a transaction, or a COMMIT, runs when a
 * hung server resumes (it reads what is in its socket before it sees the socket closed);
 * anything else (not sent, or a statement of a transaction whose COMMIT was never sent) cannot.
 */
export class DatabaseDeadlineExceeded extends Error {
  override name = 'DatabaseDeadlineExceeded';
  /** A network-timeout code: isDatabaseUnavailable counts it as an outage. */
  readonly code = 'ETIMEDOUT';

  constructor(
    message: string,
    readonly mayHaveCommitted: boolean,
  ) {
    super(message);
  }
}

/** Errors known to have changed nothing in the database (the write was never sent, or its transaction never committed). */
const committedNothing = new WeakSet<object>();

export function markCommittedNothing<E>(error: E): E {
  if (error !== null && typeof error === 'object') committedNothing.add(error);
  return error;
}

/**
 * Whether the write that failed with `error` may still take effect (or already did). True unless
 * the error (or its cause) is known to have committed nothing: callers that promise "not charged"
 * must treat "maybe" as "yes".
 */
export function mayHaveCommitted(error: unknown): boolean {
  for (let e = error, depth = 0; e !== null && typeof e === 'object' && depth < 4; e = (e as { cause?: unknown }).cause, depth += 1) {
    if (committedNothing.has(e)) return false;
    if (e instanceof DatabaseDeadlineExceeded) return e.mayHaveCommitted;
    // node-postgres: no connection was had (pool queue or connect timed out, refused): nothing was sent.
    const message = (e as { message?: unknown }).message;
    const code = (e as { code?: unknown }).code;
    if (message === 'timeout exceeded when trying to connect' || code === 'ECONNREFUSED') return false;
    // An answer that the statement failed: SQLite rolls a failed statement or transaction back, and
    // PostgreSQL canceled it (57014), refused it read-only (25006) or ran out of resources (53).
    if (typeof code === 'string' && (code.startsWith('SQLITE_') || code === '57014' || code === '25006' || code.startsWith('53'))) return false;
  }
  return true;
}

const BEGIN = /^\s*(begin|start\s+transaction)\b/i;
const ENDS = /^\s*(commit|rollback|end|abort)\b/i;
const COMMIT = /^\s*(commit|end)\b/i;

/**
 * One checkout of a pg client: everything done with it (BEGIN, the statements, COMMIT) shares
 * the deadline set when the checkout was asked for, so a transaction waits at most `budgetMs` in
 * all, not a query_timeout per statement. A client that ran out of time is destroyed on release:
 * its unanswered statement would block whoever got it next.
 */
class BoundedClient implements PostgresPoolClient {
  deadline = 0;
  private broken = false;
  private inTransaction = false;

  constructor(
    readonly inner: PoolClient,
    private readonly answers: LastAnswer,
  ) {}

  checkout(deadline: number): this {
    this.deadline = deadline;
    this.broken = false;
    this.inTransaction = false;
    return this;
  }

  query<R>(sql: string, parameters: ReadonlyArray<unknown>): Promise<PostgresQueryResult<R>>;
  query<R>(cursor: PostgresCursor<R>): PostgresCursor<R>;
  query<R>(sqlOrCursor: string | PostgresCursor<R>, parameters?: ReadonlyArray<unknown>): Promise<PostgresQueryResult<R>> | PostgresCursor<R> {
    if (typeof sqlOrCursor !== 'string') return this.inner.query(sqlOrCursor as never) as unknown as PostgresCursor<R>;
    const sql = sqlOrCursor;
    // Only a statement outside a transaction, or the COMMIT, can make a write durable.
    const durable = !this.inTransaction || COMMIT.test(sql);
    if (BEGIN.test(sql)) this.inTransaction = true;
    else if (ENDS.test(sql)) this.inTransaction = false;
    const remaining = this.deadline - Date.now();
    if (this.broken || remaining <= 0) {
      this.broken = true;
      return Promise.reject(new DatabaseDeadlineExceeded('the database did not answer within the operation deadline (not sent)', false));
    }
    const sent = this.inner.query(sql, parameters as unknown[]) as unknown as Promise<PostgresQueryResult<R>>;
    return new Promise<PostgresQueryResult<R>>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.broken = true;
        reject(new DatabaseDeadlineExceeded(`the database did not answer within the operation deadline`, durable));
      }, remaining);
      sent.then(
        (result) => {
          clearTimeout(timer);
          this.answers.at = performance.now();
          resolve(result);
        },
        (error: unknown) => {
          clearTimeout(timer);
          // A statement of a transaction whose COMMIT was never sent changed nothing.
          reject(durable ? error : markCommittedNothing(error));
        },
      );
    });
  }

  release(): void {
    this.inner.release(this.broken ? new Error('destroyed: a statement outlived its deadline') : undefined);
  }
}

/** When the database last answered a statement (performance.now()): shared by the pools over one pg pool. */
interface LastAnswer {
  at: number;
}

export interface BoundedPools {
  /** The pool of every operation but reservations. */
  pool: PostgresPool;
  /**
   * The same connections for reservations, whose wait for one is bounded: past `bound.waitMs` with the
   * database answering others meanwhile, refused (nothing sent); a database that answers nobody is an
   * outage instead, and the wait goes on to the operation's deadline. Ending it ends nothing.
   */
  admission(bound: AdmissionBound): PostgresPool;
}

/**
 * The pools kysely sees: a checkout (the wait in the pool's queue and for a new connection
 * included) and all the statements run on it must finish within `budgetMs` of asking for it.
 */
export function boundedPools(pool: Pool, budgetMs: number, onWait?: (ms: number) => void): BoundedPools {
  const clients = new WeakMap<PoolClient, BoundedClient>();
  const answers: LastAnswer = { at: -Infinity };
  const connect = async (admission?: AdmissionBound): Promise<BoundedClient> => {
    const asked = performance.now();
    const deadline = Date.now() + budgetMs;
    const acquiring = pool.connect();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      const giveUp = () => reject(markCommittedNothing(new DatabaseDeadlineExceeded('no database connection within the operation deadline', false)));
      if (!admission || admission.waitMs >= budgetMs) {
        timer = setTimeout(giveUp, budgetMs);
        return;
      }
      timer = setTimeout(() => {
        if (performance.now() - answers.at < admission.waitMs) return reject(markCommittedNothing(admission.refused()));
        timer = setTimeout(giveUp, budgetMs - admission.waitMs);
      }, admission.waitMs);
    });
    let inner: PoolClient;
    try {
      inner = await Promise.race([acquiring, timedOut]);
    } catch (error) {
      // A connection that comes after we gave up goes straight back.
      acquiring.then(
        (late) => late.release(),
        () => undefined,
      );
      throw markCommittedNothing(error);
    } finally {
      clearTimeout(timer);
    }
    onWait?.(performance.now() - asked);
    let client = clients.get(inner);
    if (!client) {
      client = new BoundedClient(inner, answers);
      clients.set(inner, client);
    }
    return client.checkout(deadline);
  };
  return {
    pool: { connect: () => connect(), end: () => pool.end() },
    admission: (bound) => ({ connect: () => connect(bound), end: async () => undefined }),
  };
}
