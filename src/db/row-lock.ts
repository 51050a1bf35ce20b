import type { Kysely, SelectQueryBuilder } from 'kysely';
import { capabilitiesOf } from './storage-capabilities';

/**
 * `SELECT ... FOR UPDATE` where the engine has row locks (PostgreSQL), so a read-then-write
 * transaction (an audited change reads the "before" state) sees no concurrent change in between.
 * SQLite has no row locks and needs none: one connection per process runs one transaction at a time.
 */
export function forUpdate<DB, TB extends keyof DB, O>(db: Kysely<DB>, query: SelectQueryBuilder<DB, TB, O>): SelectQueryBuilder<DB, TB, O> {
  return capabilitiesOf(db).rowLocks ? query.forUpdate() : query;
}
