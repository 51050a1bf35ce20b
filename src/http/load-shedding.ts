import { type ELDHistogram, monitorEventLoopDelay } from 'node:perf_hooks';
import type { RequestHandler } from 'express';
import type { AdmissionBound } from '../db/write-transactions';
import { ApiError } from '../errors/api-error';

/** Seconds an overloaded process asks a client to wait: one window of the monitor is enough for it to recover or not. */
export const OVERLOAD_RETRY_AFTER_SECONDS = 1;

/** How often the load signals are read and restarted. */
const WINDOW_MS = 500;

/** Whether the process is past what it can serve. */
export interface ProcessLoad {
  readonly overloaded: boolean;
  close(): void;
}

/** The two signals and their thresholds (ms); 0 turns a signal off. */
export interface LoadThresholds {
  /** SHED_EVENT_LOOP_DELAY_MS: the longest a timer waited past its time in the last window. */
  eventLoopDelayMs: number;
  /** SHED_DATABASE_WAIT_MS: the shortest wait for the database of any work in the last window. */
  databaseWaitMs: number;
}

/**
 * The process's load, read every half second from two signals.
 *
 * - The event loop's delay: past its threshold every callback (a request's next step, a database
 *   answer) waits about that long behind the backlog.
 * - The database wait (SQLite's group-commit queue, a PostgreSQL pool checkout), the queue where
 *   requests pile up when the gateway takes in more than it can serve: the loop itself stays on
 *   time (each callback is short) while every request waits longer for its reservation, until it
 *   fails at its database deadline (DB_STATEMENT_TIMEOUT_MS). The window's *minimum* is read, as
 *   CoDel does: a burst makes some work wait and leaves the queue empty again, a standing queue
 *   makes all of it wait. A window without database work counts as no wait.
 *
 * A request admitted now would queue, possibly past its deadline, after paying for part of its work.
 */
export class LoadMonitor implements ProcessLoad {
  private readonly histogram: ELDHistogram | undefined;
  private readonly timer: NodeJS.Timeout | undefined;
  private delayMs = 0;
  private waitMs = 0;
  private shortestWaitInWindow = Infinity;

  constructor(private readonly thresholds: LoadThresholds) {
    if (thresholds.eventLoopDelayMs === 0 && thresholds.databaseWaitMs === 0) return;
    if (thresholds.eventLoopDelayMs > 0) {
      this.histogram = monitorEventLoopDelay({ resolution: 10 });
      this.histogram.enable();
    }
    this.timer = setInterval(() => this.readWindow(), WINDOW_MS);
    this.timer.unref();
  }

  get overloaded(): boolean {
    const { eventLoopDelayMs, databaseWaitMs } = this.thresholds;
    return (eventLoopDelayMs > 0 && this.delayMs > eventLoopDelayMs) || (databaseWaitMs > 0 && this.waitMs > databaseWaitMs);
  }

  /** The last window's longest event-loop delay (ms). */
  get lastDelayMs(): number {
    return this.delayMs;
  }

  /** The last window's shortest database wait (ms; 0 without database work). */
  get lastDatabaseWaitMs(): number {
    return this.waitMs;
  }

  /** Told by the database layer how long one piece of work waited for it (OpenDatabaseOptions.onWait). */
  readonly databaseWaited = (ms: number): void => {
    if (ms < this.shortestWaitInWindow) this.shortestWaitInWindow = ms;
  };

  /** Ends the current window (every WINDOW_MS; tests call it to read a window at once). */
  readWindow(): void {
    const histogram = this.histogram;
    // The histogram's minimum is the resolution itself; an empty window has max 0.
    if (histogram) {
      this.delayMs = histogram.count > 0 ? histogram.max / 1e6 : 0;
      histogram.reset();
    }
    this.waitMs = Number.isFinite(this.shortestWaitInWindow) ? this.shortestWaitInWindow : 0;
    this.shortestWaitInWindow = Infinity;
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
    next(overloadedError('this request was refused before any work'));
  };
}

/** 503 `overloaded` with `Retry-After`: `what` says what was refused, and the message that nothing was charged. */
export function overloadedError(what: string): ApiError {
  return new ApiError('overloaded', `The gateway is overloaded; ${what} and is not charged. Retry in ${OVERLOAD_RETRY_AFTER_SECONDS} s.`, {
    headers: { 'Retry-After': String(OVERLOAD_RETRY_AFTER_SECONDS) },
  });
}

/**
 * ADMISSION_DATABASE_WAIT_MS as the database layer takes it (OpenDatabaseOptions.admission): a
 * reservation that waited that long for the database while it served others is refused, counted with
 * the shed requests.
 */
export function admissionBound(waitMs: number, onRefused: () => void): AdmissionBound {
  return {
    waitMs,
    refused: () => {
      onRefused();
      return overloadedError(`this request waited ${waitMs} ms for the database, busy with earlier requests, and was refused before anything was reserved`);
    },
  };
}
