import { type Expression, type RawBuilder, sql } from 'kysely';

/** An operand of a rule's SQL form: a column or other expression, or a value bound as a parameter. */
export type SqlValue<T> = Expression<T> | T;

/**
 * The api_keys columns the rules' SQL forms read. `table` qualifies them as raw text, for the
 * hand-written PostgreSQL statements whose UPDATE ... FROM needs it (src/db/sql-text.ts).
 */
export function keyRowColumns(table?: 'api_keys'): {
  createdAt: Expression<number>;
  periodDays: Expression<number>;
  periodStartedAt: Expression<number>;
  creditsUsed: Expression<number>;
  status: Expression<string>;
  expiresAt: Expression<number | null>;
  keyHash: Expression<string>;
} {
  const column = <T>(name: string): RawBuilder<T> => (table ? sql.raw<T>(`${table}.${name}`) : sql.ref<T>(name));
  return {
    createdAt: column<number>('created_at'),
    periodDays: column<number>('quota_period_days'),
    periodStartedAt: column<number>('period_started_at'),
    creditsUsed: column<number>('credits_used'),
    status: column<string>('status'),
    expiresAt: column<number | null>('expires_at'),
    keyHash: column<string>('key_hash'),
  };
}
