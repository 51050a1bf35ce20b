import { type RawBuilder, sql } from 'kysely';
import type { SqlValue } from './sql-value';

/**
 * A key's alert thresholds (percentages of its period's quota): a reservation that takes usage from
 * `before` to `after` crosses threshold t when before < t% of the quota <= after, in exact integer
 * arithmetic. TypeScript and SQL side by side; test/keys/rules.property.test.ts checks they agree.
 */

export interface UsageStep {
  before: number;
  after: number;
  quota: number;
}

/** The thresholds this step crosses (none without a quota). */
export function thresholdsCrossed(step: UsageStep, thresholds: readonly number[]): number[] {
  if (step.quota <= 0) return [];
  return thresholds.filter((threshold) => step.before * 100 < threshold * step.quota && step.after * 100 >= threshold * step.quota);
}

/**
 * In SQL (PostgreSQL: width_bucket, numeric[]): true when the step crosses none of `thresholds`
 * (a numeric[] sorted ascending), null without a quota. As many thresholds lie at or below the
 * percentage before as after; numeric division keeps enough digits for integer percentages of
 * quotas up to 10^9 to compare exactly. A plain expression on its operands, no subquery: the
 * reservation statement relies on PostgreSQL re-checking it on a row updated concurrently.
 */
export function crossesNoThresholdSql(
  step: { before: SqlValue<number>; after: SqlValue<number>; quota: SqlValue<number> },
  thresholds: SqlValue<readonly number[]>,
): RawBuilder<boolean> {
  const percent = (used: SqlValue<number>) => sql`(${used}) * 100::numeric / NULLIF(${step.quota}, 0)`;
  return sql<boolean>`(width_bucket(${percent(step.before)}, ${thresholds}) = width_bucket(${percent(step.after)}, ${thresholds}))`;
}
