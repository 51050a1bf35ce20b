import { ApiError } from '../errors/api-error';
import { DependencyUnavailableError } from '../errors/dependency-errors';
import { DatabaseDeadlineExceeded } from './bounded-pool';

type Waiting<Item, Result> = {
  item: Item;
  resolve: (result: Result) => void;
  reject: (reason: unknown) => void;
  /** Set once the item's statement went out: from then on its write may take effect. */
  sent: boolean;
  timer?: NodeJS.Timeout;
};

/**
 * Sends the statements of concurrent requests together: work submitted while earlier batches are
 * in flight waits for a free lane and then goes out in one statement (`runBatch`), so under load N
 * requests pay one round trip instead of N. Alone, an item runs as its own statement (`runOne`),
 * as it would without the batcher. When a batch fails, each of its items is run again on its own,
 * so one bad item fails alone (unless the failure says the database is unavailable: then each gets
 * that error at once). On PostgreSQL each round trip wakes the server's process; on a virtual
 * machine that wake-up is most of what a statement costs the gateway.
 */
export class StatementBatcher<Item, Result> {
  private queue: Array<Waiting<Item, Result>> = [];
  private busyLanes = 0;
  private scheduled = false;
  /** Conflict keys of the batches in flight: an item with one of them waits until its batch is back. */
  private readonly inFlight = new Set<string>();

  constructor(
    private readonly runBatch: (items: Item[]) => Promise<Result[]>,
    private readonly runOne: (item: Item) => Promise<Result>,
    private readonly options: {
      maxBatch: number;
      lanes: number;
      /**
       * Items with the same conflict key never share a batch (one statement updates a row once) nor run in two
       * lanes at once (so the lanes' statements never wait on each other's rows): the later waits.
       */
      conflictKey?: (item: Item) => string;
      /** Whether the items of a failed batch are run again one by one (default: always). */
      retryAlone?: (error: unknown) => boolean;
      /**
       * The longest a submitter waits, queue and statement together. A hung database holds every
       * lane: an item still queued then is dropped (never sent), one in flight is answered
       * `timedOut(true)` while its statement goes on in the background.
       */
      deadline?: { ms: number; timedOut: (sent: boolean) => unknown };
    },
  ) {}

  submit(item: Item): Promise<Result> {
    return new Promise<Result>((resolve, reject) => {
      const entry: Waiting<Item, Result> = { item, resolve, reject, sent: false };
      const deadline = this.options.deadline;
      if (deadline) {
        entry.timer = setTimeout(() => {
          if (!entry.sent) this.queue = this.queue.filter((queued) => queued !== entry);
          reject(deadline.timedOut(entry.sent));
        }, deadline.ms);
        entry.resolve = (result) => {
          clearTimeout(entry.timer);
          resolve(result);
        };
        entry.reject = (reason) => {
          clearTimeout(entry.timer);
          reject(reason);
        };
      }
      this.queue.push(entry);
      // Items submitted in this turn of the event loop join the same batch.
      if (!this.scheduled && this.busyLanes < this.options.lanes) {
        this.scheduled = true;
        setImmediate(() => {
          this.scheduled = false;
          this.pump();
        });
      }
    });
  }

  private pump(): void {
    while (this.queue.length > 0 && this.busyLanes < this.options.lanes) {
      const batch = this.takeBatch();
      if (batch.length === 0) return; // every waiting item conflicts with a batch in flight
      for (const entry of batch) entry.sent = true;
      const keys = batch.map((entry) => this.keyOf(entry.item)).filter((key) => key !== undefined);
      for (const key of keys) this.inFlight.add(key);
      this.busyLanes += 1;
      void this.send(batch).finally(() => {
        for (const key of keys) this.inFlight.delete(key);
        this.busyLanes -= 1;
        this.pump();
      });
    }
  }

  private keyOf(item: Item): string | undefined {
    return this.options.conflictKey?.(item);
  }

  /** The next batch: queue order, at most maxBatch, conflicting items left in the queue in their order. */
  private takeBatch(): Array<Waiting<Item, Result>> {
    const { maxBatch, conflictKey } = this.options;
    if (!conflictKey) return this.queue.splice(0, maxBatch);
    const batch: Array<Waiting<Item, Result>> = [];
    const rest: Array<Waiting<Item, Result>> = [];
    const taken = new Set<string>();
    for (const entry of this.queue) {
      const key = conflictKey(entry.item);
      if (batch.length < maxBatch && !taken.has(key) && !this.inFlight.has(key)) {
        taken.add(key);
        batch.push(entry);
      } else {
        rest.push(entry);
      }
    }
    this.queue = rest;
    return batch;
  }

  private async alone(entry: Waiting<Item, Result>): Promise<void> {
    try {
      entry.resolve(await this.runOne(entry.item));
    } catch (error) {
      entry.reject(error);
    }
  }

  private async send(batch: Array<Waiting<Item, Result>>): Promise<void> {
    if (batch.length === 1) return this.alone(batch[0] as Waiting<Item, Result>);
    let results: Result[];
    try {
      results = await this.runBatch(batch.map((entry) => entry.item));
      if (results.length !== batch.length) throw new Error(`a batch of ${batch.length} answered ${results.length} results`);
    } catch (error) {
      if (this.options.retryAlone && !this.options.retryAlone(error)) {
        for (const entry of batch) entry.reject(error);
        return;
      }
      await Promise.all(batch.map((entry) => this.alone(entry)));
      return;
    }
    batch.forEach((entry, index) => entry.resolve(results[index] as Result));
  }
}

/**
 * The options of a batcher on the request path: a database that is down fails every item of a batch
 * alike (no point sending each again), as does a refusal for overload, and the wait for a lane counts in the operation's time
 * (`budgetMs`, as the wait for a pooled connection does).
 */
export function databaseBatchOptions(budgetMs: number | undefined): {
  retryAlone: (error: unknown) => boolean;
  deadline?: { ms: number; timedOut: (sent: boolean) => Error };
} {
  // Refused for overload (ADMISSION_DATABASE_WAIT_MS), each item alone would wait and be refused again.
  const retryAlone = (error: unknown) => !(error instanceof DependencyUnavailableError) && !(error instanceof ApiError && error.code === 'overloaded');
  if (budgetMs === undefined) return { retryAlone };
  return {
    retryAlone,
    deadline: {
      ms: budgetMs,
      timedOut: (sent) =>
        new DependencyUnavailableError(
          'database',
          new DatabaseDeadlineExceeded(`no answer to a batched statement within ${budgetMs} ms${sent ? '' : ' (not sent)'}`, sent),
        ),
    },
  };
}
