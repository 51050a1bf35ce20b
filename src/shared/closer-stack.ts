/** Where a failing close is reported; the gateway's pino logger fits. */
export interface CloseLogger {
  error(fields: { err: unknown; part: string }, message: string): void;
}

/**
 * What startup opened, closed in reverse: each part is pushed as it starts, so a part closes before
 * the parts it was built on (the listeners before the worker, the worker before the database). A
 * close that fails is logged and the others still run; the failures are thrown together at the end.
 */
export class CloserStack {
  private readonly closers: Array<{ part: string; close: () => unknown }> = [];
  private closing: Promise<void> | undefined;

  constructor(private readonly logger: CloseLogger) {}

  /** Registers `close` for `part`. */
  push(part: string, close: () => unknown): void {
    this.closers.push({ part, close });
  }

  /** Registers a started part by its own close(), and hands it back. */
  add<T extends { close(): unknown }>(part: string, started: T): T {
    this.push(part, () => started.close());
    return started;
  }

  /** Closes every part, the last pushed first; once (a second call waits for the first). */
  closeAll(): Promise<void> {
    this.closing ??= this.run();
    return this.closing;
  }

  private async run(): Promise<void> {
    const failures: unknown[] = [];
    for (const { part, close } of this.closers.splice(0).reverse()) {
      try {
        await close();
      } catch (error) {
        this.logger.error({ err: error, part }, 'could not close a part of the gateway');
        failures.push(error);
      }
    }
    if (failures.length > 0) throw new AggregateError(failures, `${failures.length} part(s) of the gateway failed to close`);
  }
}
