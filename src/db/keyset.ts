import { type RawBuilder, type SqlBool, sql } from 'kysely';

/**
 * Rows after a cursor position in a newest-first list ordered by (created_at, id): for any table
 * with those two columns.
 */
export function olderThan(position: { createdAt: number; id: string }): RawBuilder<SqlBool> {
  return sql<SqlBool>`(created_at < ${position.createdAt} OR (created_at = ${position.createdAt} AND id < ${position.id}))`;
}
