import { type RawBuilder, sql } from 'kysely';
import { DAY_MS } from '../../shared/clock';
import type { SqlValue } from './sql-value';

/**
 * Quota periods are anchored at the key's creation: period k starts at
 * created_at + k * quota_period_days. Nothing needs a cron: the current period is computed
 * on demand, and usage stored for an older period counts as zero.
 *
 * Each rule is here twice, in TypeScript and in SQL (for statements that decide on the row as it is
 * when they run); test/keys/rules.property.test.ts checks that the two agree on both engines.
 */

export function currentPeriodStart(createdAt: number, periodDays: number, now: number): number {
  const length = periodDays * DAY_MS;
  if (now <= createdAt) return createdAt;
  return createdAt + Math.floor((now - createdAt) / length) * length;
}

export function periodEnd(periodStart: number, periodDays: number): number {
  return periodStart + periodDays * DAY_MS;
}

/** The row's stored period (period_started_at + quota_period_days) is over at `now`: its usage has lapsed. */
export function storedPeriodEnded(periodStartedAt: number, periodDays: number, now: number): boolean {
  return periodEnd(periodStartedAt, periodDays) <= now;
}

/** A key row's usage book, as stored. */
export interface StoredUsage {
  createdAt: number;
  periodDays: number;
  periodStartedAt: number;
  creditsUsed: number;
}

/**
 * The usage that counts at `now`, and the start of its period: what a reservation at `now` would
 * find (a stored period that has ended rolls over to the current one, at zero).
 */
export function usageNow(stored: StoredUsage, now: number): { used: number; periodStart: number } {
  if (!storedPeriodEnded(stored.periodStartedAt, stored.periodDays, now)) return { used: stored.creditsUsed, periodStart: stored.periodStartedAt };
  return { used: 0, periodStart: currentPeriodStart(stored.createdAt, stored.periodDays, now) };
}

/** A period length in ms, as bigint on both engines (days * 86_400_000 overflows a PostgreSQL integer). */
function periodLengthSql(periodDays: SqlValue<number>): RawBuilder<number> {
  return sql<number>`(${periodDays} * cast(${sql.lit(DAY_MS)} as bigint))`;
}

/** storedPeriodEnded() in SQL. */
export function storedPeriodEndedSql(stored: { periodStartedAt: SqlValue<number>; periodDays: SqlValue<number> }, now: SqlValue<number>): RawBuilder<boolean> {
  return sql<boolean>`(${stored.periodStartedAt} + ${periodLengthSql(stored.periodDays)} <= ${now})`;
}

/**
 * currentPeriodStart() in SQL. The cast truncates toward zero where Math.floor() rounds down: the
 * same for the non-negative quotients the guard leaves (SQLite may divide a bound `now` as a REAL,
 * PostgreSQL divides bigints).
 */
export function currentPeriodStartSql(key: { createdAt: SqlValue<number>; periodDays: SqlValue<number> }, now: SqlValue<number>): RawBuilder<number> {
  const length = periodLengthSql(key.periodDays);
  return sql<number>`(CASE WHEN ${now} <= ${key.createdAt} THEN ${key.createdAt} ELSE ${key.createdAt} + cast((${now} - ${key.createdAt}) / ${length} as bigint) * ${length} END)`;
}

/** usageNow().used in SQL: the stored credits_used, or 0 once its period has ended. */
export function usedNowSql(
  stored: { periodStartedAt: SqlValue<number>; periodDays: SqlValue<number>; creditsUsed: SqlValue<number> },
  now: SqlValue<number>,
): RawBuilder<number> {
  return sql<number>`(CASE WHEN ${storedPeriodEndedSql(stored, now)} THEN 0 ELSE ${stored.creditsUsed} END)`;
}

/** usageNow().periodStart in SQL: the stored period_started_at, or the current period's start once it has ended. */
export function periodStartNowSql(
  stored: { createdAt: SqlValue<number>; periodDays: SqlValue<number>; periodStartedAt: SqlValue<number> },
  now: SqlValue<number>,
): RawBuilder<number> {
  return sql<number>`(CASE WHEN ${storedPeriodEndedSql(stored, now)} THEN ${currentPeriodStartSql(stored, now)} ELSE ${stored.periodStartedAt} END)`;
}

/** A re-quota as the admin API asks it (setKeyQuota, setProjectQuota), for requotaColumns. */
export function requestedQuota(
  input: { credits_quota: number; quota_period_days?: number; reset_usage?: boolean },
  now: number,
): { creditsQuota: number; periodDays: number | null; resetUsage: boolean; now: number } {
  return { creditsQuota: input.credits_quota, periodDays: input.quota_period_days ?? null, resetUsage: input.reset_usage ?? false, now };
}

/**
 * A re-quota (setQuota of a key or a project) as the columns one UPDATE sets, decided from the row as it is
 * then, so a reservation running at the same moment is never lost: with `resetUsage`, or when the stored
 * period had already ended, the counter starts a new book at zero; otherwise the current book carries over
 * into the period of the new length that contains `now`. `periodDays` null keeps the row's period length.
 */
export function requotaColumns(
  stored: { createdAt: SqlValue<number>; periodDays: SqlValue<number>; periodStartedAt: SqlValue<number> },
  quota: { creditsQuota: number; periodDays: number | null; resetUsage: boolean; now: number },
) {
  const newBook = quota.resetUsage ? sql<boolean>`(1 = 1)` : storedPeriodEndedSql(stored, quota.now);
  const periodDays = sql<number>`coalesce(${quota.periodDays}, quota_period_days)`;
  return {
    credits_quota: quota.creditsQuota,
    quota_period_days: periodDays,
    period_started_at: currentPeriodStartSql({ createdAt: stored.createdAt, periodDays }, quota.now),
    credits_used: sql<number>`CASE WHEN ${newBook} THEN 0 ELSE credits_used END`,
    usage_epoch: sql<number>`CASE WHEN ${newBook} THEN usage_epoch + 1 ELSE usage_epoch END`,
    updated_at: quota.now,
  };
}
