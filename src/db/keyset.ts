import { type RawBuilder, type SqlBool, sql } from 'kysely';

/**
 * Rows after a cursor position in a newest-first list ordered by (created_at, id): for any table
 * with those two columns (`table`: its alias, when the query joins another table that has them too).
 */
export function olderThan(position: { createdAt: number; id: string }, table?: string): RawBuilder<SqlBool> {
  const createdAt = sql.ref(table === undefined ? 'created_at' : `${table}.created_at`);
  const id = sql.ref(table === undefined ? 'id' : `${table}.id`);
  return sql<SqlBool>`(${createdAt} < ${position.createdAt} OR (${createdAt} = ${position.createdAt} AND ${id} < ${position.id}))`;
}
