import { DAY_MS } from '../shared/clock';

/**
 * Quota periods are anchored at the key's creation: period k starts at
 * created_at + k * quota_period_days. Nothing needs a cron: the current period is computed
 * on demand, and usage stored for an older period counts as zero.
 */
export function currentPeriodStart(createdAt: number, periodDays: number, now: number): number {
  const length = periodDays * DAY_MS;
  if (now <= createdAt) return createdAt;
  return createdAt + Math.floor((now - createdAt) / length) * length;
}

export function periodEnd(periodStart: number, periodDays: number): number {
  return periodStart + periodDays * DAY_MS;
}
