import type { Kysely } from 'kysely';
import type { Database, StoredImagesTable } from '../db/schema';

type Db = Kysely<Database>;

/** Who may name a stored image as an input: the key (or service) whose generation stored it. */
export type ImageOwner = { kind: 'key'; id: string } | { kind: 'service'; id: string };

/** The owner of a generation's images: its key, or (internal API, no key) its service client; every generation has one of them. */
export function imageOwnerOf(generation: { key_id: string | null; client_id: string | null }): ImageOwner {
  return generation.key_id !== null ? { kind: 'key', id: generation.key_id } : { kind: 'service', id: generation.client_id ?? '' };
}

/** The owner columns of a stored image's row. */
export function ownerColumns(owner: ImageOwner): Pick<StoredImagesTable, 'key_id' | 'client_id'> {
  return owner.kind === 'key' ? { key_id: owner.id, client_id: null } : { key_id: null, client_id: owner.id };
}

/** All SQL on stored_images. */
export async function insertStoredImages(db: Db, rows: StoredImagesTable[]): Promise<void> {
  if (rows.length > 0) await db.insertInto('stored_images').values(rows).execute();
}

/**
 * An image stored for `owner` (a client key, or an internal service's client id), live at `now`: by
 * the owner the image row carries, so it outlives its generation's row (GENERATION_RETENTION_DAYS).
 */
export async function findOwnedImage(db: Db, id: string, owner: ImageOwner, now: number): Promise<StoredImagesTable | undefined> {
  return db
    .selectFrom('stored_images')
    .selectAll()
    .where('id', '=', id)
    .where(owner.kind === 'key' ? 'key_id' : 'client_id', '=', owner.id)
    .where('deleted_at', 'is', null)
    .where('expires_at', '>', now)
    .executeTakeFirst();
}

export async function findStoredImage(db: Db, id: string): Promise<StoredImagesTable | undefined> {
  return db.selectFrom('stored_images').selectAll().where('id', '=', id).executeTakeFirst();
}

/** Images still stored but past their expiry, oldest first. */
export async function findExpiredImageIds(db: Db, now: number, limit: number): Promise<string[]> {
  const rows = await db
    .selectFrom('stored_images')
    .select('id')
    .where('deleted_at', 'is', null)
    .where('expires_at', '<=', now)
    .orderBy('expires_at')
    .limit(limit)
    .execute();
  return rows.map((row) => row.id);
}

export async function markImagesDeleted(db: Db, ids: string[], now: number): Promise<void> {
  if (ids.length > 0) await db.updateTable('stored_images').set({ deleted_at: now }).where('id', 'in', ids).where('deleted_at', 'is', null).execute();
}

/** Drops tombstones whose bytes went before `before`. */
export async function purgeImageTombstones(db: Db, before: number): Promise<void> {
  await db.deleteFrom('stored_images').where('deleted_at', '<=', before).execute();
}

/**
 * Ends the retention of a generation's output images other than `kept` (the result of the run that
 * settles it): what another run of it stored (a takeover's predecessor that died while or after storing
 * them) is not its result. Their URLs answer 410 and the sweeper deletes whatever bytes reached the store.
 * Its inputs stay.
 */
export async function withdrawOtherOutputs(db: Db, generationId: string, kept: readonly string[], now: number): Promise<void> {
  let query = db
    .updateTable('stored_images')
    .set({ expires_at: now })
    .where('generation_id', '=', generationId)
    .where('role', '=', 'output')
    .where('expires_at', '>', now);
  if (kept.length > 0) query = query.where('id', 'not in', kept);
  await query.execute();
}

/**
 * Ends the retention of a generation's images now (withdrawn): served as expired, swept with the
 * others. `imageIds`: only those (one run's, when another run of the generation may have delivered).
 */
export async function expireGenerationImages(db: Db, generationId: string, now: number, imageIds?: readonly string[]): Promise<void> {
  if (imageIds !== undefined && imageIds.length === 0) return;
  let query = db.updateTable('stored_images').set({ expires_at: now }).where('generation_id', '=', generationId).where('expires_at', '>', now);
  if (imageIds !== undefined) query = query.where('id', 'in', imageIds);
  await query.execute();
}
