/** Entries renewed per call of `renew` (well under SQLite's and PostgreSQL's parameter limits). */
export const RENEWAL_BATCH = 500;

/**
 * What a process holds and must keep renewing (generation leases, key concurrency leases): one
 * timer for all of them, running only while something is held, and one `renew` call per
 * RENEWAL_BATCH entries, instead of a timer and a statement per entry. A round that is still
 * running when the next is due is not doubled (the leases outlive a few missed rounds); a failed
 * batch is reported and retried by the next round.
 */
export class RenewedSet<Key, Value> {
  private readonly held = new Map<Key, Value>();
  private timer: NodeJS.Timeout | undefined;
  private renewing = false;

  constructor(
    private readonly periodMs: number,
    private readonly renew: (batch: Array<[Key, Value]>) => Promise<void>,
    private readonly onError: (error: unknown, entries: number) => void,
  ) {}

  add(key: Key, value: Value): void {
    this.held.set(key, value);
    this.timer ??= setInterval(() => void this.round(), Math.max(10, this.periodMs)).unref();
  }

  delete(key: Key): void {
    this.held.delete(key);
    if (this.held.size === 0) this.stop();
  }

  get(key: Key): Value | undefined {
    return this.held.get(key);
  }

  has(key: Key): boolean {
    return this.held.has(key);
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private async round(): Promise<void> {
    if (this.renewing) return;
    this.renewing = true;
    const entries = [...this.held];
    try {
      for (let at = 0; at < entries.length; at += RENEWAL_BATCH) {
        const batch = entries.slice(at, at + RENEWAL_BATCH);
        await this.renew(batch).catch((error: unknown) => this.onError(error, batch.length));
      }
    } finally {
      this.renewing = false;
    }
  }
}
