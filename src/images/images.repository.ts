import type { Kysely } from 'kysely';
import type { Database, StoredImagesTable } from '../db/schema';

type Db = Kysely<Database>;

/** All SQL on stored_images. */
export async function insertStoredImages(db: Db, rows: StoredImagesTable[]): Promise<void> {
  if (rows.length > 0) await db.insertInto('stored_images').values(rows).execute();
}

export async function findStoredImage(db: Db, id: string): Promise<StoredImagesTable | undefined> {
  return db.selectFrom('stored_images').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function findExpiredImageIds(db: Db, now: number, limit: number): Promise<string[]> {
  const rows = await db.selectFrom('stored_images').select('id').where('expires_at', '<=', now).orderBy('expires_at').limit(limit).execute();
  return rows.map((row) => row.id);
}

export async function deleteStoredImages(db: Db, ids: string[]): Promise<void> {
  if (ids.length > 0) await db.deleteFrom('stored_images').where('id', 'in', ids).execute();
}
