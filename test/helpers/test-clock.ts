import type { Clock } from '../../src/shared/clock';
import { DAY_MS } from '../../src/shared/clock';

/** Real time plus an offset the test can move forward. */
export class TestClock implements Clock {
  private offsetMs = 0;

  now(): number {
    return Date.now() + this.offsetMs;
  }

  advanceDays(days: number): void {
    this.offsetMs += days * DAY_MS;
  }

  advanceMs(ms: number): void {
    this.offsetMs += ms;
  }
}
