import type { Kysely, Transaction } from 'kysely';
import type { Database } from './schema';
import { withDirectRuns } from './sqlite-direct';

export type WriteWork<T> = (trx: Transaction<Database>) => Promise<T>;

/** Short write transactions of the request path (reserve, settle, release). */
export interface WriteTransactions {
  run<T>(work: WriteWork<T>): Promise<T>;
  /**
   * Work that is atomic by itself: on PostgreSQL, ONE statement (a data-modifying CTE), sent
   * without BEGIN/COMMIT, so it costs one round trip instead of three or more; on SQLite, queued
   * into the group commit like `run` (several statements are fine there, they share its transaction).
   */
  single<T>(work: (db: Kysely<Database>) => Promise<T>): Promise<T>;
  /**
   * `run` for a reservation, the first write of a generation: refused with 503 `overloaded`, nothing
   * run, when it cannot start within ADMISSION_DATABASE_WAIT_MS because the database is busy with
   * work admitted before it. Work already admitted (its settlement) goes through `run` and waits.
   */
  admit<T>(work: WriteWork<T>): Promise<T>;
  /** `single` for a reservation, bounded as `admit` is. */
  admitSingle<T>(work: (db: Kysely<Database>) => Promise<T>): Promise<T>;
}

/**
 * One transaction per call: PostgreSQL, where a pool runs them side by side and the server groups WAL flushes
 * itself. `admissionDb`: the same connections, with a reservation's wait for one bounded (boundedPools).
 */
export function directTransactions(db: Kysely<Database>, admissionDb: Kysely<Database> = db): WriteTransactions {
  return {
    run: (work) => db.transaction().execute(work),
    single: (work) => work(db),
    admit: (work) => admissionDb.transaction().execute(work),
    admitSingle: (work) => work(admissionDb),
  };
}

/**
 * The bound on a reservation's wait for the database (ADMISSION_DATABASE_WAIT_MS; 0 = none): past
 * `waitMs` while the database serves work admitted before it, the gateway is taking in more than the
 * database serves, and the reservation is refused with `refused()` (503 overloaded), nothing run.
 */
export interface AdmissionBound {
  waitMs: number;
  refused: () => Error;
}

interface Queued {
  work: WriteWork<unknown>;
  /** performance.now() when queued. */
  queuedAt: number;
  /** A reservation's: refused instead of run when its batch starts later than this (performance.now()). */
  startBy?: number;
  resolve: (value: unknown) => void;
  reject: (reason: unknown) => void;
}

/**
 * Group commit for SQLite, which has one writer and pays for every commit (WAL frames, locks):
 * work queued during one turn of the event loop runs in a single transaction, in order, and each
 * caller's promise settles only after that transaction committed, so nothing is answered before it
 * is durable. When the batch fails, every piece is retried in a transaction of its own, so one bad
 * piece fails alone.
 */
export class GroupCommit implements WriteTransactions {
  private queue: Queued[] = [];
  private flushing = false;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly maxBatch = 100,
    /** Told the wait of the batch's last (shortest-waiting) work as each batch starts: OpenDatabaseOptions.onWait. */
    private readonly onWait?: (ms: number) => void,
    private readonly admission?: AdmissionBound,
  ) {}

  single<T>(work: (db: Kysely<Database>) => Promise<T>): Promise<T> {
    return this.run(work);
  }

  run<T>(work: WriteWork<T>): Promise<T> {
    return this.enqueue(work, undefined);
  }

  admit<T>(work: WriteWork<T>): Promise<T> {
    const waitMs = this.admission?.waitMs ?? 0;
    return this.enqueue(work, waitMs > 0 ? performance.now() + waitMs : undefined);
  }

  admitSingle<T>(work: (db: Kysely<Database>) => Promise<T>): Promise<T> {
    return this.admit(work);
  }

  private enqueue<T>(work: WriteWork<T>, startBy: number | undefined): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const queuedAt = performance.now();
      this.queue.push({ work, queuedAt, startBy, resolve: resolve as (value: unknown) => void, reject });
      if (this.queue.length === 1 && !this.flushing) setImmediate(() => void this.flush());
    });
  }

  /** The next batch, in queue order; reservations whose turn came too late are refused, not run. */
  private takeBatch(): Queued[] {
    const taken = this.queue.splice(0, this.maxBatch);
    const now = performance.now();
    if (!taken.some((item) => item.startBy !== undefined && now > item.startBy)) return taken;
    return taken.filter((item) => {
      if (item.startBy === undefined || now <= item.startBy) return true;
      item.reject(this.admission!.refused());
      return false;
    });
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    while (this.queue.length > 0) {
      const batch = this.takeBatch();
      if (batch.length === 0) continue;
      this.onWait?.(performance.now() - batch[batch.length - 1]!.queuedAt);
      let results: unknown[] | undefined;
      try {
        results = await this.db.transaction().execute((trx) =>
          withDirectRuns(trx, async () => {
            const out: unknown[] = [];
            for (const item of batch) out.push(await item.work(trx));
            return out;
          }),
        );
      } catch {
        results = undefined;
      }
      if (results) {
        batch.forEach((item, index) => item.resolve(results[index]));
      } else {
        for (const item of batch)
          await this.db
            .transaction()
            .execute((trx) => withDirectRuns(trx, () => item.work(trx)))
            .then(item.resolve, item.reject);
      }
      // Let the requests that arrived meanwhile queue up before the next batch.
      if (this.queue.length > 0) await new Promise((resolve) => setImmediate(resolve));
    }
    this.flushing = false;
  }
}
