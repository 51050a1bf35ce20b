import { type ELDHistogram, monitorEventLoopDelay } from 'node:perf_hooks';
import type { RequestHandler } from 'express';
import { ApiError } from '../errors/api-error';

/** Seconds an overloaded process asks a client to wait: one window of the monitor is enough for it to recover or not. */
export const OVERLOAD_RETRY_AFTER_SECONDS = 1;

/** How often the event loop's delay is read and its histogram restarted. */
const WINDOW_MS = 500;

/** Whether the process is past what it can serve. */
export interface ProcessLoad {
  readonly overloaded: boolean;
  close(): void;
}

/**
 * The process's load, read from the event loop's delay: the longest a timer waited past its time in
 * the last window. Past `thresholdMs`, every callback (a request's next step, a database answer)
 * waits about that long behind the backlog, so a request admitted now would queue, possibly past its
 * database deadline (DB_STATEMENT_TIMEOUT_MS), after paying for part of its work. A threshold of 0
 * turns the check off.
 */
export class EventLoopLoad implements ProcessLoad {
  private readonly histogram: ELDHistogram | undefined;
  private readonly timer: NodeJS.Timeout | undefined;
  private delayMs = 0;

  constructor(private readonly thresholdMs: number) {
    if (thresholdMs === 0) return;
    this.histogram = monitorEventLoopDelay({ resolution: 10 });
    this.histogram.enable();
    this.timer = setInterval(() => this.readWindow(), WINDOW_MS);
    this.timer.unref();
  }

  get overloaded(): boolean {
    return this.delayMs > this.thresholdMs && this.thresholdMs > 0;
  }

  /** The last window's longest delay (ms). */
  get lastDelayMs(): number {
    return this.delayMs;
  }

  private readWindow(): void {
    const histogram = this.histogram!;
    // The histogram's minimum is the resolution itself; an empty window has max 0.
    this.delayMs = histogram.count > 0 ? histogram.max / 1e6 : 0;
    histogram.reset();
  }

  close(): void {
    clearInterval(this.timer);
    this.histogram?.disable();
  }
}

/**
 * The `x-shed-under-load` layer: an operation that starts paid work (a generation) is refused at
 * once, before its body is read or anything is counted or reserved, while the process is overloaded:
 * 503 `overloaded` with `Retry-After`, instead of a wait that may end in a timeout after seconds.
 * Work already admitted (its settlement included) is never refused.
 */
export function shedUnderLoad(load: ProcessLoad, onShed: () => void): RequestHandler {
  return (_req, _res, next) => {
    if (!load.overloaded) return next();
    onShed();
    next(
      new ApiError(
        'overloaded',
        `The gateway is overloaded; this request was refused before any work and is not charged. Retry in ${OVERLOAD_RETRY_AFTER_SECONDS} s.`,
        {
          headers: { 'Retry-After': String(OVERLOAD_RETRY_AFTER_SECONDS) },
        },
      ),
    );
  };
}
