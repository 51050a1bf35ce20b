/**
 * Sends the statements of concurrent requests together: work submitted while earlier batches are
 * in flight waits for a free lane and then goes out in one statement (`runBatch`), so under load N
 * requests pay one round trip instead of N. Alone, an item runs as its own statement (`runOne`),
 * as it would without the batcher. When a batch fails, each of its items is run again on its own,
 * so one bad item fails alone. On PostgreSQL each round trip wakes the server's process; on a
 * virtual machine that wake-up is most of what a statement costs the gateway.
 */
export class StatementBatcher<Item, Result> {
  private queue: Array<{ item: Item; resolve: (result: Result) => void; reject: (reason: unknown) => void }> = [];
  private busyLanes = 0;
  private scheduled = false;

  constructor(
    private readonly runBatch: (items: Item[]) => Promise<Result[]>,
    private readonly runOne: (item: Item) => Promise<Result>,
    private readonly options: {
      maxBatch: number;
      lanes: number;
      /** Items with the same conflict key never share a batch (one statement updates a row once): the later waits for the next. */
      conflictKey?: (item: Item) => string;
    },
  ) {}

  submit(item: Item): Promise<Result> {
    return new Promise<Result>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
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
      this.busyLanes += 1;
      void this.send(batch).finally(() => {
        this.busyLanes -= 1;
        this.pump();
      });
    }
  }

  /** The next batch: queue order, at most maxBatch, conflicting items left in the queue in their order. */
  private takeBatch(): StatementBatcher<Item, Result>['queue'] {
    const { maxBatch, conflictKey } = this.options;
    if (!conflictKey) return this.queue.splice(0, maxBatch);
    const batch: StatementBatcher<Item, Result>['queue'] = [];
    const rest: StatementBatcher<Item, Result>['queue'] = [];
    const taken = new Set<string>();
    for (const entry of this.queue) {
      const key = conflictKey(entry.item);
      if (batch.length < maxBatch && !taken.has(key)) {
        taken.add(key);
        batch.push(entry);
      } else {
        rest.push(entry);
      }
    }
    this.queue = rest;
    return batch;
  }

  private async send(batch: StatementBatcher<Item, Result>['queue']): Promise<void> {
    if (batch.length === 1) {
      const [only] = batch as [(typeof batch)[number]];
      await this.runOne(only.item).then(only.resolve, only.reject);
      return;
    }
    let results: Result[] | undefined;
    try {
      results = await this.runBatch(batch.map((entry) => entry.item));
    } catch {
      results = undefined;
    }
    if (results) {
      batch.forEach((entry, index) => entry.resolve(results[index] as Result));
      return;
    }
    await Promise.all(batch.map((entry) => this.runOne(entry.item).then(entry.resolve, entry.reject)));
  }
}
