import { currentPeriodStart, periodEnd, storedPeriodEnded, usageNow } from '../../src/keys/rules/quota-period';
import { DAY_MS } from '../../src/shared/clock';

/** Quota periods anchored at the key's creation: period k starts at created_at + k * quota_period_days. */
describe('quota periods', () => {
  const created = Date.parse('2026-01-01T00:00:00Z');

  it('the first period starts at creation and lasts quota_period_days, its end excluded', () => {
    expect(currentPeriodStart(created, 30, created)).toBe(created);
    expect(currentPeriodStart(created, 30, created + 1)).toBe(created);
    expect(currentPeriodStart(created, 30, created + 30 * DAY_MS - 1)).toBe(created);
  });

  it('rolls over exactly at the boundary, one millisecond matters', () => {
    expect(currentPeriodStart(created, 30, created + 30 * DAY_MS)).toBe(created + 30 * DAY_MS);
    expect(currentPeriodStart(created, 1, created + DAY_MS - 1)).toBe(created);
    expect(currentPeriodStart(created, 1, created + DAY_MS)).toBe(created + DAY_MS);
  });

  it('skips empty periods: period k, however many passed unused', () => {
    expect(currentPeriodStart(created, 7, created + 23 * DAY_MS)).toBe(created + 21 * DAY_MS);
    expect(currentPeriodStart(created, 7, created + 700 * DAY_MS + 5)).toBe(created + 700 * DAY_MS);
    expect(currentPeriodStart(created, 3650, created + 3650 * DAY_MS * 3 + 1)).toBe(created + 3650 * DAY_MS * 3);
  });

  it('anchors at the creation instant, not at midnight', () => {
    const odd = Date.parse('2026-03-15T13:45:10.123Z');
    expect(currentPeriodStart(odd, 1, Date.parse('2026-03-17T09:00:00Z'))).toBe(Date.parse('2026-03-16T13:45:10.123Z'));
  });

  it('a clock behind the creation time (another replica, a test clock) is still the first period', () => {
    expect(currentPeriodStart(created, 7, created - 1)).toBe(created);
    expect(currentPeriodStart(created, 7, created - 30 * DAY_MS)).toBe(created);
  });

  it('is the same for every instant of a period, and the next period starts where this one ends', () => {
    for (let now = created; now < created + 10 * DAY_MS; now += DAY_MS / 4) {
      const start = currentPeriodStart(created, 3, now);
      expect(start).toBeLessThanOrEqual(now);
      expect(now).toBeLessThan(periodEnd(start, 3));
      expect(currentPeriodStart(created, 3, periodEnd(start, 3))).toBe(periodEnd(start, 3));
    }
  });

  it('periodEnd is the start plus quota_period_days, in UTC days (no calendar months)', () => {
    expect(periodEnd(created, 30)).toBe(Date.parse('2026-01-31T00:00:00Z'));
    expect(periodEnd(Date.parse('2028-02-28T00:00:00Z'), 1)).toBe(Date.parse('2028-02-29T00:00:00Z'));
    expect(periodEnd(created, 365)).toBe(Date.parse('2027-01-01T00:00:00Z'));
  });
});

describe('the stored usage book', () => {
  const created = Date.parse('2026-01-01T00:00:00Z');

  it('storedPeriodEnded: the stored period is over from its end on, not before', () => {
    expect(storedPeriodEnded(created, 7, created)).toBe(false);
    expect(storedPeriodEnded(created, 7, created + 7 * DAY_MS - 1)).toBe(false);
    expect(storedPeriodEnded(created, 7, created + 7 * DAY_MS)).toBe(true);
    expect(storedPeriodEnded(created, 7, created + 70 * DAY_MS)).toBe(true);
    expect(storedPeriodEnded(created, 7, created - DAY_MS)).toBe(false);
  });

  it('usageNow: within the stored period, the stored usage and start', () => {
    const stored = { createdAt: created, periodDays: 7, periodStartedAt: created + 7 * DAY_MS, creditsUsed: 42 };
    expect(usageNow(stored, created + 7 * DAY_MS)).toEqual({ used: 42, periodStart: created + 7 * DAY_MS });
    expect(usageNow(stored, created + 14 * DAY_MS - 1)).toEqual({ used: 42, periodStart: created + 7 * DAY_MS });
  });

  it('usageNow: once the stored period ended, zero in the current period (lazily, empty periods skipped)', () => {
    const stored = { createdAt: created, periodDays: 7, periodStartedAt: created, creditsUsed: 42 };
    expect(usageNow(stored, created + 7 * DAY_MS)).toEqual({ used: 0, periodStart: created + 7 * DAY_MS });
    expect(usageNow(stored, created + 30 * DAY_MS)).toEqual({ used: 0, periodStart: created + 28 * DAY_MS });
  });
});
