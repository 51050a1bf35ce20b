/** At most `max` calls at once; the rest wait in order (and stop waiting when their signal aborts). */
export class ConcurrencyLimit {
  private active = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(readonly max: number) {}

  get inFlight(): number {
    return this.active;
  }

  async acquire(signal: AbortSignal): Promise<void> {
    if (this.active < this.max) {
      this.active += 1;
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const grant = () => {
        signal.removeEventListener('abort', onAbort);
        this.active += 1;
        resolve();
      };
      const onAbort = () => {
        const index = this.waiting.indexOf(grant);
        if (index >= 0) this.waiting.splice(index, 1);
        reject(signal.reason);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(grant);
    });
  }

  release(): void {
    this.active -= 1;
    this.waiting.shift()?.();
  }
}
