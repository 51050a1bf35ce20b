import type { Kysely, Updateable } from 'kysely';
import type { ChannelsTable, Database } from '../db/schema';

/** All SQL on channels; each function one query, on any executor. */
export type Db = Kysely<Database>;

export async function insertChannel(db: Db, row: ChannelsTable): Promise<void> {
  await db.insertInto('channels').values(row).execute();
}

export async function findChannelRow(db: Db, id: string): Promise<ChannelsTable | undefined> {
  return db.selectFrom('channels').selectAll().where('id', '=', id).executeTakeFirst();
}

/** Every channel: there are few, and routing needs all of them. */
export async function listChannelRows(db: Db): Promise<ChannelsTable[]> {
  return db.selectFrom('channels').selectAll().orderBy('priority', 'desc').orderBy('created_at', 'asc').execute();
}

export async function updateChannelRow(db: Db, id: string, changes: Updateable<ChannelsTable>): Promise<ChannelsTable | undefined> {
  return db.updateTable('channels').set(changes).where('id', '=', id).returningAll().executeTakeFirst();
}

export async function deleteChannelRow(db: Db, id: string): Promise<boolean> {
  const result = await db.deleteFrom('channels').where('id', '=', id).executeTakeFirst();
  return Number(result.numDeletedRows) === 1;
}

/** Takes an enabled channel out after an account error; false when it was not enabled (any more). */
export async function autoDisableChannel(db: Db, id: string, reason: string, now: number): Promise<boolean> {
  const result = await db
    .updateTable('channels')
    .set({ status: 'auto_disabled', disabled_reason: reason.slice(0, 500), disabled_at: now, updated_at: now })
    .where('id', '=', id)
    .where('status', '=', 'enabled')
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Replaces sealed credentials only if they are still the ones read (re-seal after a key rotation). */
export async function resealCredentials(db: Db, id: string, previous: string, sealed: string): Promise<void> {
  await db.updateTable('channels').set({ credentials_sealed: sealed }).where('id', '=', id).where('credentials_sealed', '=', previous).execute();
}
