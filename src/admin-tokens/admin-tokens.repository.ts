import type { Kysely } from 'kysely';
import { olderThan } from '../db/keyset';
import { forUpdate } from '../db/row-lock';
import type { AdminTokensTable, Database } from '../db/schema';
import type { AdminTokenStatus } from './admin-token.model';

/** All SQL on admin_tokens. Every function takes the executor, so it runs inside a transaction too. */
type Db = Kysely<Database>;

export async function insertAdminToken(db: Db, row: AdminTokensTable): Promise<void> {
  await db.insertInto('admin_tokens').values(row).execute();
}

export async function findAdminTokenById(db: Db, id: string, options: { lock?: boolean } = {}): Promise<AdminTokensTable | undefined> {
  const query = db.selectFrom('admin_tokens').selectAll().where('id', '=', id);
  return (options.lock ? forUpdate(db, query) : query).executeTakeFirst();
}

export async function findAdminTokenByHash(db: Db, tokenHash: string): Promise<AdminTokensTable | undefined> {
  return db.selectFrom('admin_tokens').selectAll().where('token_hash', '=', tokenHash).executeTakeFirst();
}

/** Newest first; one row more than `limit` so the caller knows whether a next page exists. */
export async function listAdminTokens(
  db: Db,
  query: { status?: AdminTokenStatus; limit: number; after?: { createdAt: number; id: string }; now: number },
): Promise<AdminTokensTable[]> {
  let q = db.selectFrom('admin_tokens').selectAll();
  if (query.status === 'revoked') q = q.where('revoked_at', 'is not', null);
  if (query.status === 'active') {
    q = q.where('revoked_at', 'is', null).where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', query.now)]));
  }
  if (query.status === 'expired') q = q.where('revoked_at', 'is', null).where('expires_at', '<=', query.now);
  if (query.after) q = q.where(olderThan(query.after));
  return q
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(query.limit + 1)
    .execute();
}

export async function revokeAdminToken(db: Db, id: string, at: number): Promise<AdminTokensTable | undefined> {
  return db.updateTable('admin_tokens').set({ revoked_at: at }).where('id', '=', id).returningAll().executeTakeFirst();
}

/** The tokens created by any of `parentIds`, locked (PostgreSQL) so none of them mints a child meanwhile. */
export async function lockChildrenOf(db: Db, parentIds: readonly string[]): Promise<AdminTokensTable[]> {
  if (parentIds.length === 0) return [];
  return forUpdate(db, db.selectFrom('admin_tokens').selectAll().where('created_by', 'in', parentIds).orderBy('created_at').orderBy('id')).execute();
}
